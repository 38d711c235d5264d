import { useCallback, useEffect, useState } from "react";

/**
 * The live view: while the worker waits for a person (a proposal to decide, a takeover to act in), it streams the
 * env's screen as `live.frame` messages (no seq, never stored): a picture when the screen changed, a keepalive
 * without one while it stays the same. The page shows the newest picture with a "Live" badge and falls back to the
 * proposal's still when frames stop. The picture is the env's whole screen: its width and height are the screen's,
 * so a click on it maps to the env's coordinates as on a still.
 */
export interface LiveScreen {
  /** A `data:` URL of the JPEG (the page's CSP allows data: images). */
  src: string;
  width: number;
  height: number;
  /** The worker's frame number, increasing while a proposal is open. */
  frame: number;
  /** Date.now() when the last frame (or keepalive) arrived. */
  receivedAt: number;
}

/** Frames this much older than the newest are no longer "live": the page shows the proposal's still again. */
export const LIVE_STALE_MS = 3000;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The live screen after a `live.frame` message's data; a malformed message leaves it as it was. */
export function liveScreenFrom(current: LiveScreen | null, data: unknown, now: number): LiveScreen | null {
  if (!data || typeof data !== "object") return current;
  const d = data as Record<string, unknown>;
  const { frame, width, height, jpeg_b64: jpeg } = d;
  if (typeof frame !== "number" || typeof width !== "number" || typeof height !== "number") return current;
  if (!(width > 0 && height > 0)) return current;
  if (typeof jpeg === "string" && jpeg.length > 0) {
    if (!BASE64.test(jpeg)) return current;
    return { src: `data:image/jpeg;base64,${jpeg}`, width, height, frame, receivedAt: now };
  }
  // A keepalive: the screen has not changed since the picture we hold (if we hold one: a page that joined since
  // gets the picture again within a few seconds).
  if (current && current.width === width && current.height === height) return { ...current, frame, receivedAt: now };
  return current;
}

export function isLive(screen: LiveScreen | null, now: number): boolean {
  return screen !== null && now - screen.receivedAt < LIVE_STALE_MS;
}

export interface LiveScreenState {
  /** The newest picture while frames keep coming; null once they stopped for LIVE_STALE_MS. */
  screen: LiveScreen | null;
  onFrame: (data: unknown) => void;
  /** A step ran or a new proposal opened: its still is newer than the last frame until the next one arrives. */
  clear: () => void;
}

export function useLiveScreen(): LiveScreenState {
  const [screen, setScreen] = useState<LiveScreen | null>(null);
  useEffect(() => {
    if (!screen) return;
    const left = screen.receivedAt + LIVE_STALE_MS - Date.now();
    const timer = setTimeout(() => setScreen((s) => (s && isLive(s, Date.now()) ? s : null)), Math.max(0, left) + 50);
    return () => clearTimeout(timer);
  }, [screen]);
  const onFrame = useCallback((data: unknown) => setScreen((current) => liveScreenFrom(current, data, Date.now())), []);
  const clear = useCallback(() => setScreen(null), []);
  return { screen, onFrame, clear };
}
