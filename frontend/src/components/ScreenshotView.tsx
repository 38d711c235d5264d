import type { MouseEvent } from "react";
import type { Action } from "../api/episodes";
import { actionLabel, actionMarkers, displayToScreenshot, type Marker, type Point } from "./markers";

interface ScreenshotViewProps {
  src: string;
  /** The screenshot's own pixel size; the overlay's coordinate system. */
  width: number;
  height: number;
  alt: string;
  /** The executed action, drawn solid. */
  action?: Action | null;
  /** A proposed action awaiting a decision, drawn dashed. */
  proposal?: Action | null;
  /** Rendered width in CSS pixels; the height follows the aspect ratio. */
  displayWidth?: number;
  testId?: string;
  /**
   * Makes the screenshot clickable (a person acting after a takeover): called with the clicked
   * point in screenshot pixels, whatever size the picture is shown at.
   */
  onPick?: (point: Point) => void;
  /** What a click does, for the pointer's tooltip ("Click here to act"). */
  pickTitle?: string;
  /** The image failed to load (so a page can fall back to another picture). */
  onError?: () => void;
}

const SCROLL_ARROW: Record<string, [number, number]> = {
  up: [0, -1],
  down: [0, 1],
  left: [-1, 0],
  right: [1, 0],
};

function MarkerShape({ marker, tone, size }: { marker: Marker; tone: "action" | "proposal"; size: number }) {
  // Radii in screenshot pixels, proportional to the picture so they read at any zoom.
  const r = Math.max(3, size * 0.035);
  const cls = `marker marker-${tone}`;
  if (marker.kind === "click") {
    return (
      <g className={cls} data-marker={marker.variant}>
        <circle className="marker-ring" cx={marker.at.x} cy={marker.at.y} r={r} />
        {marker.variant === "double_click" && <circle className="marker-ring" cx={marker.at.x} cy={marker.at.y} r={r * 1.6} />}
        <circle className="marker-dot" cx={marker.at.x} cy={marker.at.y} r={Math.max(0.75, r * 0.25)} />
      </g>
    );
  }
  if (marker.kind === "drag") {
    return (
      <g className={cls} data-marker="drag">
        <line className="marker-line" x1={marker.from.x} y1={marker.from.y} x2={marker.to.x} y2={marker.to.y} />
        <circle className="marker-ring" cx={marker.from.x} cy={marker.from.y} r={r} />
        <circle className="marker-dot" cx={marker.to.x} cy={marker.to.y} r={r * 0.5} />
      </g>
    );
  }
  const [dx, dy] = SCROLL_ARROW[marker.direction];
  const len = r * 3;
  return (
    <g className={cls} data-marker="scroll">
      <circle className="marker-ring" cx={marker.at.x} cy={marker.at.y} r={r} />
      <line className="marker-line" x1={marker.at.x} y1={marker.at.y} x2={marker.at.x + dx * len} y2={marker.at.y + dy * len} />
    </g>
  );
}

/**
 * A screenshot scaled up crisply (screenshots are small, about 160x210), with an SVG overlay in
 * the screenshot's own pixel coordinates marking where the action points.
 */
export function ScreenshotView({
  src,
  width,
  height,
  alt,
  action,
  proposal,
  displayWidth,
  testId,
  onPick,
  pickTitle,
  onError,
}: ScreenshotViewProps) {
  const w = width > 0 ? width : 160;
  const h = height > 0 ? height : 210;
  const markers = actionMarkers(action);
  const proposed = actionMarkers(proposal);
  const size = Math.min(w, h);
  // Actions without a place (type, hotkey, wait...) get a caption instead of a marker.
  const label = actionLabel(proposal ?? null) ?? actionLabel(action ?? null);

  function pick(event: MouseEvent<HTMLImageElement>) {
    if (!onPick) return;
    const rect = event.currentTarget.getBoundingClientRect();
    if (!(rect.width > 0 && rect.height > 0)) return; // not laid out: no honest mapping exists
    const at = { x: event.clientX - rect.left, y: event.clientY - rect.top };
    onPick(displayToScreenshot(at, { width: rect.width, height: rect.height }, { width: w, height: h }));
  }

  return (
    <div
      className={`screenshot${onPick ? " pickable" : ""}`}
      style={{ width: displayWidth ? `${displayWidth}px` : undefined, aspectRatio: `${w} / ${h}` }}
    >
      <img
        src={src}
        alt={alt}
        width={w}
        height={h}
        data-testid={testId}
        draggable={false}
        onClick={onPick ? pick : undefined}
        title={onPick ? pickTitle : undefined}
        onError={onError}
      />
      {label && (
        <span className={`screenshot-label ${proposal && actionLabel(proposal) ? "marker-proposal" : "marker-action"}`} data-testid="action-label">
          {label}
        </span>
      )}
      {(markers.length > 0 || proposed.length > 0) && (
        <svg
          className="screenshot-overlay"
          viewBox={`0 0 ${w} ${h}`}
          preserveAspectRatio="none"
          aria-hidden="true"
          data-testid="action-overlay"
        >
          {markers.map((m, i) => (
            <MarkerShape key={`a${i}`} marker={m} tone="action" size={size} />
          ))}
          {proposed.map((m, i) => (
            <MarkerShape key={`p${i}`} marker={m} tone="proposal" size={size} />
          ))}
        </svg>
      )}
    </div>
  );
}

/**
 * A desktop's or web app's screen (1280x720) is wider than tall and full of small text: pages show it as wide as
 * they allow (up to its own size) instead of in the narrow column a phone-sized MiniWoB page gets, and scale it
 * smoothly (a MiniWoB page is scaled up as crisp pixels). Clicks map back to its own pixels at any size.
 */
export function isWideScreen(width: number, height: number): boolean {
  return width >= 640 && width > height;
}
