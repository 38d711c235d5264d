/**
 * The live session's keyboard shortcuts: one list, read by the key handler and by the `?`
 * overlay, so the two can never disagree.
 */
import { useEffect, useRef } from "react";

export type ShortcutAction =
  | "approve"
  | "edit"
  | "reject"
  | "pause-resume"
  | "takeover"
  | "handback"
  | "finish"
  | "claim"
  | "talk"
  | "help"
  | "close";

export interface Shortcut {
  /** `KeyboardEvent.key`, lower-cased for letters. */
  key: string;
  /** How the key is written on the overlay and in titles. */
  label: string;
  action: ShortcutAction;
  description: string;
}

export const SHORTCUTS: Shortcut[] = [
  { key: "a", label: "A", action: "approve", description: "Approve the proposed step" },
  { key: "e", label: "E", action: "edit", description: "Edit the proposal (Ctrl+Enter submits)" },
  { key: "r", label: "R", action: "reject", description: "Reject the proposal, with an optional reason" },
  { key: " ", label: "Space", action: "pause-resume", description: "Pause or resume the episode" },
  { key: "t", label: "T", action: "takeover", description: "Take over: act on the screen yourself" },
  { key: "h", label: "H", action: "handback", description: "Hand control back to the model" },
  { key: "f", label: "F", action: "finish", description: "Finish the episode with an outcome" },
  { key: "c", label: "C", action: "claim", description: "Claim control of the episode" },
  { key: "m", label: "M", action: "talk", description: "Hold to talk: think aloud into the microphone (release to stop)" },
  { key: "?", label: "?", action: "help", description: "Show or hide this list" },
  { key: "Escape", label: "Esc", action: "close", description: "Close the open form or this list" },
];

export function shortcutLabel(action: ShortcutAction): string {
  return SHORTCUTS.find((s) => s.action === action)?.label ?? "";
}

/** A person typing in a field is writing text, not pressing shortcuts. */
export function isTypingTarget(target: EventTarget | null): boolean {
  if (!target || !(target instanceof HTMLElement)) return false;
  const tag = target.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
}

/** The shortcut a key press means here, or null (modifier chords and typing are never shortcuts). */
export function shortcutFor(event: Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "altKey" | "target">): Shortcut | null {
  if (event.ctrlKey || event.metaKey || event.altKey) return null;
  if (event.key === "Escape") return SHORTCUTS.find((s) => s.key === "Escape") ?? null;
  if (isTypingTarget(event.target)) return null;
  const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
  return SHORTCUTS.find((s) => s.key === key) ?? null;
}

/** Call `onShortcut` for each shortcut pressed on the page; it returns whether it handled it. */
export function useShortcuts(onShortcut: (action: ShortcutAction) => boolean): void {
  const handler = useRef(onShortcut);
  handler.current = onShortcut;
  useEffect(() => {
    function onKeyDown(event: KeyboardEvent) {
      if (event.defaultPrevented || event.repeat) return;
      const shortcut = shortcutFor(event);
      // A focused button would also "click" on Space; the shortcut takes its place.
      if (shortcut && handler.current(shortcut.action)) event.preventDefault();
    }
    window.addEventListener("keydown", onKeyDown);
    return () => window.removeEventListener("keydown", onKeyDown);
  }, []);
}
