/**
 * A small dependency-free SVG line chart for dashboards (loss curves, success rates):
 * several series, axes with round ticks, and a hover tooltip that reads every series at the
 * nearest x.
 */
import { type MouseEvent, useId, useMemo, useState } from "react";

export interface SeriesPoint {
  x: number;
  y: number;
}

export interface Series {
  name: string;
  points: SeriesPoint[];
  /** Any CSS colour; defaults cycle through a calm palette. */
  color?: string;
}

export interface LineChartProps {
  series: Series[];
  width?: number;
  height?: number;
  xLabel?: string;
  yLabel?: string;
  formatX?: (x: number) => string;
  formatY?: (y: number) => string;
  /** Include 0 on the y axis (rates, counts) rather than fitting the data tightly. */
  yFromZero?: boolean;
  title?: string;
  /** Mark every point with a dot (sparse series, e.g. one value a day, where a lone point draws no line). */
  showPoints?: boolean;
  /** The x values to label, instead of round ticks (whole days on a date axis). */
  xTickValues?: number[];
  /** The y axis's upper end at least this (a rate's 1.0). */
  yMax?: number;
}

export const PALETTE = ["#4f46e5", "#0d9488", "#d97706", "#db2777", "#2563eb", "#65a30d"];
const MARGIN = { top: 12, right: 16, bottom: 36, left: 52 };

/** About `count` round tick values (1, 2, 5 × 10^k steps) covering [min, max]. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    return niceTicks(min - pad, max + pad, count);
  }
  if (min > max) [min, max] = [max, min];
  const raw = (max - min) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const first = Math.floor(min / step) * step;
  const ticks: number[] = [];
  for (let v = first; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toFixed(12)));
  if (ticks[ticks.length - 1] < max) ticks.push(Number((ticks[ticks.length - 1] + step).toFixed(12)));
  return ticks;
}

/** A linear map from [d0, d1] to [r0, r1]; a flat domain maps to the middle. */
export function linearScale(d0: number, d1: number, r0: number, r1: number): (v: number) => number {
  if (d1 === d0) return () => (r0 + r1) / 2;
  return (v) => r0 + ((v - d0) / (d1 - d0)) * (r1 - r0);
}

const defaultFormat = (v: number) =>
  Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : String(Number(v.toFixed(3)));

export function LineChart({
  series,
  width = 560,
  height = 240,
  xLabel,
  yLabel,
  formatX = defaultFormat,
  formatY = defaultFormat,
  yFromZero = false,
  title,
  showPoints = false,
  xTickValues,
  yMax,
}: LineChartProps) {
  const clipId = useId();
  const [hoverX, setHoverX] = useState<number | null>(null);
  const innerW = width - MARGIN.left - MARGIN.right;
  const innerH = height - MARGIN.top - MARGIN.bottom;

  const layout = useMemo(() => {
    const all = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
    if (all.length === 0) return null;
    const xs = all.map((p) => p.x);
    const ys = all.map((p) => p.y);
    const xTicks = xTickValues ?? niceTicks(Math.min(...xs), Math.max(...xs));
    const top = Math.max(yFromZero ? Math.max(0, ...ys) : Math.max(...ys), yMax ?? -Infinity);
    const yTicks = niceTicks(yFromZero ? Math.min(0, ...ys) : Math.min(...ys), top);
    const xMin = Math.min(...xs);
    const xMax = Math.max(...xs);
    const x = linearScale(xMin, xMax, 0, innerW);
    const y = linearScale(yTicks[0], yTicks[yTicks.length - 1], innerH, 0);
    const uniqueXs = [...new Set(xs)].sort((a, b) => a - b);
    return { xTicks: xTicks.filter((t) => t >= xMin && t <= xMax), yTicks, x, y, uniqueXs };
  }, [series, innerW, innerH, yFromZero, xTickValues, yMax]);

  if (!layout) {
    return (
      <div className="chart-empty muted" role="img" aria-label={title ?? "Chart"}>
        No data yet.
      </div>
    );
  }
  const { x, y, xTicks, yTicks, uniqueXs } = layout;

  function onMove(event: MouseEvent<SVGRectElement>) {
    const rect = event.currentTarget.getBoundingClientRect();
    const px = ((event.clientX - rect.left) / Math.max(1, rect.width)) * innerW;
    let best = uniqueXs[0];
    for (const candidate of uniqueXs) if (Math.abs(x(candidate) - px) < Math.abs(x(best) - px)) best = candidate;
    setHoverX(best);
  }

  const hovered =
    hoverX === null
      ? []
      : series
          .map((s, i) => ({ s, i, point: s.points.find((p) => p.x === hoverX) }))
          .filter((h): h is { s: Series; i: number; point: SeriesPoint } => Boolean(h.point));
  const tooltipLeft = hoverX === null ? 0 : MARGIN.left + x(hoverX);

  return (
    <figure className="chart" style={{ width }}>
      {title && <figcaption className="chart-title">{title}</figcaption>}
      <div className="chart-body">
        <svg width={width} height={height} viewBox={`0 0 ${width} ${height}`} role="img" aria-label={title ?? "Line chart"}>
          <defs>
            <clipPath id={clipId}>
              <rect width={innerW} height={innerH} />
            </clipPath>
          </defs>
          <g transform={`translate(${MARGIN.left},${MARGIN.top})`}>
            {yTicks.map((t) => (
              <g key={`y${t}`} className="chart-grid">
                <line x1={0} x2={innerW} y1={y(t)} y2={y(t)} />
                <text x={-8} y={y(t)} dy="0.32em" textAnchor="end">
                  {formatY(t)}
                </text>
              </g>
            ))}
            {xTicks.map((t) => (
              <text key={`x${t}`} className="chart-tick" x={x(t)} y={innerH + 16} textAnchor="middle">
                {formatX(t)}
              </text>
            ))}
            <line className="chart-axis" x1={0} x2={innerW} y1={innerH} y2={innerH} />
            <g clipPath={`url(#${clipId})`}>
              {series.map((s, i) => {
                const pts = s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).sort((a, b) => a.x - b.x);
                const d = pts.map((p, j) => `${j === 0 ? "M" : "L"}${x(p.x).toFixed(2)},${y(p.y).toFixed(2)}`).join("");
                return (
                  <path
                    key={s.name}
                    d={d}
                    fill="none"
                    stroke={s.color ?? PALETTE[i % PALETTE.length]}
                    strokeWidth={1.75}
                    data-series={s.name}
                  />
                );
              })}
            </g>
            {series.map((s, i) => {
              const finite = s.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
              // a lone point draws no line: it is shown as a dot (a run's first progress line)
              return (showPoints || finite.length === 1) &&
                finite.map((p) => (
                    <circle
                      key={`${s.name}-${p.x}`}
                      className="chart-point"
                      cx={x(p.x)}
                      cy={y(p.y)}
                      r={3.5}
                      fill={s.color ?? PALETTE[i % PALETTE.length]}
                      data-point={s.name}
                    />
                  ));
            })}
            {hoverX !== null && (
              <g className="chart-hover">
                <line x1={x(hoverX)} x2={x(hoverX)} y1={0} y2={innerH} />
                {hovered.map(({ s, i, point }) => (
                  <circle key={s.name} cx={x(point.x)} cy={y(point.y)} r={3.5} fill={s.color ?? PALETTE[i % PALETTE.length]} />
                ))}
              </g>
            )}
            {xLabel && (
              <text className="chart-label" x={innerW / 2} y={innerH + 32} textAnchor="middle">
                {xLabel}
              </text>
            )}
            {yLabel && (
              <text className="chart-label" transform={`translate(${-40},${innerH / 2}) rotate(-90)`} textAnchor="middle">
                {yLabel}
              </text>
            )}
            <rect
              width={innerW}
              height={innerH}
              fill="transparent"
              onMouseMove={onMove}
              onMouseLeave={() => setHoverX(null)}
              data-testid="chart-hit-area"
            />
          </g>
        </svg>
        {hoverX !== null && hovered.length > 0 && (
          <div
            className="chart-tooltip"
            role="tooltip"
            style={{ left: tooltipLeft, top: MARGIN.top, transform: tooltipLeft > width / 2 ? "translateX(calc(-100% - 8px))" : "translateX(8px)" }}
          >
            <div className="chart-tooltip-x">
              {xLabel ? `${xLabel} ` : ""}
              {formatX(hoverX)}
            </div>
            {hovered.map(({ s, i, point }) => (
              <div key={s.name} className="chart-tooltip-row">
                <span className="swatch" style={{ background: s.color ?? PALETTE[i % PALETTE.length] }} />
                {s.name}: <strong>{formatY(point.y)}</strong>
              </div>
            ))}
          </div>
        )}
      </div>
      {series.length > 1 && (
        <ul className="chart-legend">
          {series.map((s, i) => (
            <li key={s.name}>
              <span className="swatch" style={{ background: s.color ?? PALETTE[i % PALETTE.length] }} />
              {s.name}
            </li>
          ))}
        </ul>
      )}
    </figure>
  );
}
