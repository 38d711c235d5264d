/**
 * Where an action points on its screenshot. Coordinates are screenshot pixels (the action
 * grammar's contract), so the overlay uses the screenshot's own size as its viewBox and scales
 * with the image: a marker at (x, y) stays on the pixel the agent meant at any zoom.
 */
import type { Action } from "../api/episodes";

export interface Point {
  x: number;
  y: number;
}

export interface Size {
  width: number;
  height: number;
}

export type Marker =
  | { kind: "click"; at: Point; variant: "click" | "double_click" | "right_click" }
  | { kind: "drag"; from: Point; to: Point }
  | { kind: "scroll"; at: Point; direction: "up" | "down" | "left" | "right" };

const POINT_ACTIONS = new Set(["click", "double_click", "right_click"]);

function coordinate(value: unknown): number | null {
  const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
  return typeof n === "number" && Number.isFinite(n) ? n : null;
}

function point(args: Record<string, unknown>, xKey: string, yKey: string): Point | null {
  const x = coordinate(args[xKey]);
  const y = coordinate(args[yKey]);
  return x === null || y === null ? null : { x, y };
}

/** The markers to draw for an action; none for actions without a place (type, wait, ...). */
export function actionMarkers(action: Action | null | undefined): Marker[] {
  if (!action) return [];
  const args = action.args ?? {};
  if (POINT_ACTIONS.has(action.name)) {
    const at = point(args, "x", "y");
    return at ? [{ kind: "click", at, variant: action.name as "click" | "double_click" | "right_click" }] : [];
  }
  if (action.name === "drag") {
    const from = point(args, "x1", "y1");
    const to = point(args, "x2", "y2");
    return from && to ? [{ kind: "drag", from, to }] : [];
  }
  if (action.name === "scroll") {
    const at = point(args, "x", "y");
    const raw = String(args.direction ?? "down");
    const direction = (["up", "down", "left", "right"].includes(raw) ? raw : "down") as "up" | "down" | "left" | "right";
    return at ? [{ kind: "scroll", at, direction }] : [];
  }
  return [];
}

/**
 * Map a point between two sizes of the same picture (screenshot pixels <-> displayed pixels).
 * The overlay itself needs no mapping (its viewBox is the screenshot size); this is for
 * positioning HTML next to a marker and for turning a click on the image back into screenshot
 * pixels when a person acts.
 */
export function scalePoint(p: Point, from: Size, to: Size): Point {
  return { x: (p.x * to.width) / from.width, y: (p.y * to.height) / from.height };
}

/** A click on the displayed image, in screenshot pixels, rounded and kept inside the picture. */
export function displayToScreenshot(p: Point, displayed: Size, screenshot: Size): Point {
  const s = scalePoint(p, displayed, screenshot);
  const clamp = (v: number, max: number) => Math.min(Math.max(Math.round(v), 0), Math.max(0, max - 1));
  return { x: clamp(s.x, screenshot.width), y: clamp(s.y, screenshot.height) };
}

/**
 * A caption for actions that have no place on the screen: what is typed, which keys, the
 * model's answer or question. Null for actions drawn as markers, and for none.
 */
export function actionLabel(action: Action | null | undefined): string | null {
  if (!action) return null;
  const args = action.args ?? {};
  const text = (value: unknown, max = 40) => {
    const s = String(value ?? "");
    return s.length > max ? `${s.slice(0, max - 1)}…` : s;
  };
  switch (action.name) {
    case "type":
      return `⌨ type “${text(args.text)}”`;
    case "hotkey":
      return `⌨ ${text(args.keys)}`;
    case "wait":
      return "⏳ wait";
    case "finished":
      return `✓ finished${args.answer ? `: ${text(args.answer)}` : ""}`;
    case "call_user":
      return `? asks: ${text(args.question)}`;
    case "shell":
      return `$ ${text(args.command)}`;
    default:
      return null;
  }
}
