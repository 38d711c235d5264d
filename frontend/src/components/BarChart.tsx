/**
 * A small dependency-free SVG bar chart, the LineChart's sibling for values by category
 * (episodes per annotator, agreement and kappa): one bar a category, drawn from zero (so
 * negative values, like a kappa below chance, hang below the axis), each labelled with its value.
 */
import { linearScale, niceTicks, PALETTE } from "./LineChart";

export interface Bar {
  label: string;
  /** null: no value (shown as "—", no bar). */
  value: number | null;
  color?: string;
  /** Shown on hover. */
  title?: string;
}

export interface BarChartProps {
  bars: Bar[];
  width?: number;
  height?: number;
  title?: string;
  yLabel?: string;
  formatY?: (y: number) => string;
  /** The y axis covers at least [yMin, yMax] (a kappa's -1..1, a share's 0..1). */
  yMin?: number;
  yMax?: number;
  /** Counts: label only whole numbers on the y axis. */
  integer?: boolean;
}

const MARGIN = { top: 18, right: 12, bottom: 40, left: 52 };

const defaultFormat = (v: number) => String(Number(v.toFixed(3)));

export function BarChart({
  bars,
  width = 360,
  height = 220,
  title,
  yLabel,
  formatY = defaultFormat,
  yMin,
  yMax,
  integer = false,
}: BarChartProps) {
  const values = bars.map((b) => b.value).filter((v): v is number => v !== null && Number.isFinite(v));
  if (bars.length === 0) {
    return (
      <div className="chart-empty muted" role="img" aria-label={title ?? "Chart"}>
        No data yet.
      </div>
    );
  }
  const innerW = width - MARGIN.left - MARGIN.right;
  const innerH = height - MARGIN.top - MARGIN.bottom;
  const low = Math.min(0, yMin ?? 0, ...values);
  const high = Math.max(0, yMax ?? 0, ...values, values.length ? 0 : 1);
  // Whole-number steps for counts: ask for no more ticks than there are units to cover.
  const ticks = niceTicks(low, high, integer ? Math.max(1, Math.min(5, Math.ceil(high - low))) : 5);
  const y = linearScale(ticks[0], ticks[ticks.length - 1], innerH, 0);
  const band = innerW / bars.length;
  const barW = Math.min(56, band * 0.6);

  return (
    <figure className="chart" style={{ width }}>
      {title && <figcaption className="chart-title">{title}</figcaption>}
      <div className="chart-body">
        <svg width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={title ?? "Bar chart"}>
          <g transform={`translate(${MARGIN.left},${MARGIN.top})`}>
            {ticks.map((t) => (
              <g key={`y${t}`} className="chart-grid">
                <line x1={0} x2={innerW} y1={y(t)} y2={y(t)} />
                <text x={-8} y={y(t)} dy="0.32em" textAnchor="end">
                  {formatY(t)}
                </text>
              </g>
            ))}
            {bars.map((bar, i) => {
              const cx = band * i + band / 2;
              const color = bar.color ?? PALETTE[i % PALETTE.length];
              const has = bar.value !== null && Number.isFinite(bar.value);
              const top = has ? Math.min(y(bar.value as number), y(0)) : y(0);
              const h = has ? Math.abs(y(bar.value as number) - y(0)) : 0;
              return (
                <g key={bar.label} data-bar={bar.label}>
                  <title>{bar.title ?? `${bar.label}: ${has ? formatY(bar.value as number) : "no value"}`}</title>
                  {has && (
                    <rect className="chart-bar" x={cx - barW / 2} y={top} width={barW} height={Math.max(h, 1)} fill={color} rx={2} />
                  )}
                  <text className="chart-bar-value" x={cx} y={has && (bar.value as number) < 0 ? top + h + 12 : top - 4} textAnchor="middle">
                    {has ? formatY(bar.value as number) : "—"}
                  </text>
                  <text className="chart-tick" x={cx} y={innerH + 16} textAnchor="middle">
                    {bar.label.length > 14 ? `${bar.label.slice(0, 13)}…` : bar.label}
                  </text>
                </g>
              );
            })}
            <line className="chart-axis" x1={0} x2={innerW} y1={y(0)} y2={y(0)} />
            {yLabel && (
              <text className="chart-label" transform={`translate(${-40},${innerH / 2}) rotate(-90)`} textAnchor="middle">
                {yLabel}
              </text>
            )}
          </g>
        </svg>
      </div>
    </figure>
  );
}
