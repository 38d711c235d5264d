/**
 * Pure helpers of the replay: what an action reads as, where the audio's time falls among the
 * words and steps, and which key does what.
 *
 * Times are on the session clock (server epoch seconds): transcript words carry it, a clip's
 * audio time t is `clip.origin + t`, and a step's window ends when it was stored (`created_at`),
 * as annotation/audio.py `step_windows` aligns words.
 */
import type { Action } from "../api/types";
import { actionText } from "../session/grammar";
import type { ReplayStep, StoredProposal, TranscriptWord } from "./queries";

/** An action as the grammar writes it: `click(x=8, y=12)`. */
export function formatAction(action: Action | null | undefined): string {
  if (!action) return "";
  try {
    return actionText(action);
  } catch {
    return `${action.name}(${JSON.stringify(action.args ?? {})})`;
  }
}

/** What a step did, as text ("" for a void turn). */
export function stepActionText(step: Pick<ReplayStep, "action" | "action_text">): string {
  return step.action_text || formatAction(step.action);
}

/** The action line of the model's overridden proposal. */
export function proposalActionText(proposal: StoredProposal | null | undefined): string {
  if (!proposal) return "";
  if (proposal.action_text) return proposal.action_text;
  if (proposal.action) return formatAction(proposal.action);
  const line = (proposal.raw ?? "").split("\n").find((l) => /^\s*action\s*:/i.test(l));
  return line ? line.replace(/^\s*action\s*:\s*/i, "") : (proposal.raw ?? "");
}

/** The proposal's thought, from its fields or its raw text. */
export function proposalThought(proposal: StoredProposal | null | undefined): string {
  if (!proposal) return "";
  if (proposal.thought) return proposal.thought;
  const match = /thought\s*:\s*([\s\S]*?)(?:\n\s*action\s*:|$)/i.exec(proposal.raw ?? "");
  return match ? match[1].trim() : "";
}

export function epochSeconds(iso: string | null | undefined): number | null {
  if (!iso) return null;
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? null : ms / 1000;
}

/** The step whose window holds session time `t`: the first one stored at or after `t`, else the last. */
export function stepAtTime(steps: Pick<ReplayStep, "index" | "created_at">[], t: number): number | null {
  if (steps.length === 0) return null;
  for (const step of steps) {
    const end = epochSeconds(step.created_at);
    if (end !== null && end >= t) return step.index;
  }
  return steps[steps.length - 1].index;
}

/** The index (in `words`) of the word being spoken at `t`, or -1 between words. */
export function wordAtTime(words: Pick<TranscriptWord, "start" | "end">[], t: number): number {
  for (let i = 0; i < words.length; i += 1) {
    if (words[i].start <= t && t < Math.max(words[i].end, words[i].start + 0.05)) return i;
  }
  return -1;
}

/** Which step the replay should show at session time `t`: the spoken word's step, else the step window's. */
export function stepForAudio(
  words: Pick<TranscriptWord, "start" | "end" | "step">[],
  steps: Pick<ReplayStep, "index" | "created_at">[],
  t: number,
): number | null {
  const at = wordAtTime(words, t);
  if (at >= 0 && words[at].step !== null) return words[at].step;
  return stepAtTime(steps, t);
}

export type ReplayCommand =
  | "previous-step"
  | "next-step"
  | "first-step"
  | "last-step"
  | "previous-episode"
  | "next-episode"
  | "accept"
  | "reject"
  | { grade: number };

/** The shortcuts, for the help line and the overlay. */
export const SHORTCUTS: [string, string][] = [
  ["← / k", "previous step"],
  ["→ / j", "next step"],
  ["[", "previous episode"],
  ["]", "next episode"],
  ["a / r", "accept / reject"],
  ["1–5", "grade"],
];

/**
 * The command a key press means in the replay, or null. Nothing is taken from a person typing
 * (text fields, the comment box) or seeking in an audio player; in a drop-down (the step label)
 * only ← / → move between steps, so its own keys keep choosing labels.
 */
export function replayCommand(event: Pick<KeyboardEvent, "key" | "altKey" | "ctrlKey" | "metaKey" | "shiftKey" | "target">): ReplayCommand | null {
  if (event.altKey || event.ctrlKey || event.metaKey) return null;
  const target = event.target as HTMLElement | null;
  const tag = target?.tagName ?? "";
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "AUDIO" || tag === "VIDEO" || target?.isContentEditable) {
    return null;
  }
  const inSelect = tag === "SELECT";
  switch (event.key) {
    case "ArrowLeft":
      return event.shiftKey ? "previous-episode" : "previous-step";
    case "ArrowRight":
      return event.shiftKey ? "next-episode" : "next-step";
  }
  if (inSelect) return null;
  switch (event.key) {
    case "k":
      return "previous-step";
    case "j":
      return "next-step";
    case "Home":
      return "first-step";
    case "End":
      return "last-step";
    case "[":
      return "previous-episode";
    case "]":
      return "next-episode";
    case "a":
      return "accept";
    case "r":
      return "reject";
  }
  if (/^[1-5]$/.test(event.key)) return { grade: Number(event.key) };
  return null;
}
