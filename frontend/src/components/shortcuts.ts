/**
 * Every keyboard shortcut of the app, in one table: the live session page (`/episodes/:id`) and
 * the replay page (`/projects/:id/review/:episodeId`) both read their keys from it, and every hint
 * that names a key (the `?` overlay, the replay's help line, button titles and `<kbd>`s) is made
 * from it, so the keys a page answers and the keys it shows can never disagree.
 *
 * Each page keeps its own rules for *when* a key counts (typing in a field, a drop-down, modifier
 * chords): `shortcutFor` below for the live session, `replayCommand` in review/replay.ts.
 */
import { useEffect, useRef } from "react";

export type SessionAction =
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
  | "close"
  | "submit";

export type ReplayAction =
  | "previous-step"
  | "next-step"
  | "first-step"
  | "last-step"
  | "previous-episode"
  | "next-episode"
  | "accept"
  | "reject"
  | "grade";

interface ShortcutRow<Page extends string, Action extends string> {
  page: Page;
  action: Action;
  /**
   * The keys that do it, as `KeyboardEvent.key` (letters lower-case); `Shift+` / `Ctrl+` name a
   * chord. Empty for a key that something other than the page's handler answers (Ctrl+Enter: the
   * open form itself).
   */
  keys: readonly string[];
  /** How the key is written in hints. */
  label: string;
  /** What it does, in the words the page's hint shows. */
  hint: string;
  /** Rows of one group share one entry of a help line: "a / r  accept / reject". */
  group?: string;
  /** Left out of the page's help line (it still works). */
  unlisted?: boolean;
}

export type SessionShortcut = ShortcutRow<"session", SessionAction>;
export type ReplayShortcut = ShortcutRow<"replay", ReplayAction>;
export type Shortcut = SessionShortcut | ReplayShortcut;
export type ShortcutPage = Shortcut["page"];

export const SHORTCUTS: readonly Shortcut[] = [
  // The live session page; its `?` overlay lists every row.
  { page: "session", action: "approve", keys: ["a"], label: "A", hint: "Approve the proposed step" },
  { page: "session", action: "edit", keys: ["e"], label: "E", hint: "Edit the proposal (Ctrl+Enter submits)" },
  { page: "session", action: "reject", keys: ["r"], label: "R", hint: "Reject the proposal, with an optional reason" },
  { page: "session", action: "pause-resume", keys: [" "], label: "Space", hint: "Pause or resume the episode" },
  { page: "session", action: "takeover", keys: ["t"], label: "T", hint: "Take over: act on the screen yourself" },
  { page: "session", action: "handback", keys: ["h"], label: "H", hint: "Hand control back to the model" },
  { page: "session", action: "finish", keys: ["f"], label: "F", hint: "Finish the episode with an outcome" },
  { page: "session", action: "claim", keys: ["c"], label: "C", hint: "Claim control of the episode" },
  { page: "session", action: "talk", keys: ["m"], label: "M", hint: "Hold to talk: think aloud into the microphone (release to stop)" },
  { page: "session", action: "help", keys: ["?"], label: "?", hint: "Show or hide this list" },
  { page: "session", action: "close", keys: ["Escape"], label: "Esc", hint: "Close the open form or this list" },
  { page: "session", action: "submit", keys: [], label: "Ctrl+Enter", hint: "Submit the open form" },

  // The replay page; its help line lists the rows not `unlisted`.
  { page: "replay", action: "previous-step", keys: ["ArrowLeft", "k"], label: "← / k", hint: "previous step" },
  { page: "replay", action: "next-step", keys: ["ArrowRight", "j"], label: "→ / j", hint: "next step" },
  { page: "replay", action: "first-step", keys: ["Home"], label: "Home", hint: "first step", unlisted: true },
  { page: "replay", action: "last-step", keys: ["End"], label: "End", hint: "last step", unlisted: true },
  { page: "replay", action: "previous-episode", keys: ["[", "Shift+ArrowLeft"], label: "[", hint: "previous episode" },
  { page: "replay", action: "next-episode", keys: ["]", "Shift+ArrowRight"], label: "]", hint: "next episode" },
  { page: "replay", action: "accept", keys: ["a"], label: "a", hint: "accept", group: "verdict" },
  { page: "replay", action: "reject", keys: ["r"], label: "r", hint: "reject", group: "verdict" },
  { page: "replay", action: "grade", keys: ["1", "2", "3", "4", "5"], label: "1–5", hint: "grade" },
];

export const SESSION_SHORTCUTS: readonly SessionShortcut[] = SHORTCUTS.filter(
  (s): s is SessionShortcut => s.page === "session",
);
export const REPLAY_SHORTCUTS: readonly ReplayShortcut[] = SHORTCUTS.filter(
  (s): s is ReplayShortcut => s.page === "replay",
);

/** How a page's key for `action` is written ("C", "Space", "]"); "" when it has none. */
export function shortcutLabel(action: SessionAction, page?: "session"): string;
export function shortcutLabel(action: ReplayAction, page: "replay"): string;
export function shortcutLabel(action: string, page: ShortcutPage = "session"): string {
  return SHORTCUTS.find((s) => s.page === page && s.action === action)?.label ?? "";
}

/** One entry of a page's help: the key(s) as written, and what they do. */
export interface ShortcutHint {
  label: string;
  hint: string;
}

/** A page's help, in table order: grouped rows joined ("a / r", "accept / reject"), unlisted ones left out. */
export function shortcutHints(page: ShortcutPage): ShortcutHint[] {
  const hints: ShortcutHint[] = [];
  const groups = new Map<string, ShortcutHint>();
  for (const s of SHORTCUTS) {
    if (s.page !== page || s.unlisted) continue;
    const grouped = s.group ? groups.get(s.group) : undefined;
    if (grouped) {
      grouped.label += ` / ${s.label}`;
      grouped.hint += ` / ${s.hint}`;
      continue;
    }
    const hint = { label: s.label, hint: s.hint };
    if (s.group) groups.set(s.group, hint);
    hints.push(hint);
  }
  return hints;
}

/** A person typing in a field is writing text, not pressing shortcuts. */
export function isTypingTarget(target: EventTarget | null): boolean {
  if (!target || !(target instanceof HTMLElement)) return false;
  const tag = target.tagName;
  return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
}

/**
 * The live session's shortcut a key press means, or null (modifier chords and typing are never
 * shortcuts; Escape always is). Letters count in either case.
 */
export function shortcutFor(
  event: Pick<KeyboardEvent, "key" | "ctrlKey" | "metaKey" | "altKey" | "target">,
): SessionShortcut | null {
  if (event.ctrlKey || event.metaKey || event.altKey) return null;
  if (event.key === "Escape") return SESSION_SHORTCUTS.find((s) => s.keys.includes("Escape")) ?? null;
  if (isTypingTarget(event.target)) return null;
  const key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
  return SESSION_SHORTCUTS.find((s) => s.keys.includes(key)) ?? null;
}

/** Call `onShortcut` for each live session shortcut pressed on the page; it returns whether it handled it. */
export function useShortcuts(onShortcut: (action: SessionAction) => boolean): void {
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
