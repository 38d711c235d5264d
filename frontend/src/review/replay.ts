/**
 * Pure helpers of the replay: what an action reads as, where the audio's time falls among the
 * words and steps, and which key does what (the keys are the replay's rows of components/shortcuts.ts).
 *
 * Times are on the session clock (server epoch seconds): transcript words carry it, a clip's
 * audio time t is `clip.origin + t`, and a step's window ends when it was stored (`created_at`),
 * as annotation/audio.py `step_windows` aligns words.
 */
import type { Action, StoredProposal } from "../api/episodes";
import { REPLAY_SHORTCUTS, type ReplayAction } from "../components/shortcuts";
import { actionText } from "../components/grammar";
import type { TranscriptWord } from "../api/audio";
import type { ReplayStep } from "../api/review";

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

export type ReplayCommand = Exclude<ReplayAction, "grade"> | { grade: number };

/**
 * The command a key press means in the replay, or null; the keys are the replay's rows of the
 * shortcut table. Nothing is taken from a person typing (text fields, the comment box) or seeking
 * in an audio player; in a drop-down (the step label) only ← / → move between steps, so its own
 * keys keep choosing labels.
 */
export function replayCommand(event: Pick<KeyboardEvent, "key" | "altKey" | "ctrlKey" | "metaKey" | "shiftKey" | "target">): ReplayCommand | null {
  if (event.altKey || event.ctrlKey || event.metaKey) return null;
  const target = event.target as HTMLElement | null;
  const tag = target?.tagName ?? "";
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "AUDIO" || tag === "VIDEO" || target?.isContentEditable) {
    return null;
  }
  if (tag === "SELECT" && event.key !== "ArrowLeft" && event.key !== "ArrowRight") return null;
  const withKey = (key: string) => REPLAY_SHORTCUTS.find((s) => s.keys.includes(key));
  // Shift makes a chord only where the table names one (Shift+← / →); elsewhere it is ignored.
  const shortcut = (event.shiftKey ? withKey(`Shift+${event.key}`) : undefined) ?? withKey(event.key);
  if (!shortcut) return null;
  return shortcut.action === "grade" ? { grade: Number(event.key) } : shortcut.action;
}
