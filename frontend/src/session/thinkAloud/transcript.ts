/**
 * The transcript shown on the session page: the words the transcript API returned (on load and
 * after each reconnect) merged with the `transcript.words` events that arrived since, grouped by
 * the step each was spoken in.
 */
import type { TranscriptWordRecord } from "../../api/audio";

export interface SpokenWord {
  word: string;
  start: number;
  end: number;
  /** The step it belongs to; null until the server attaches it. */
  step: number | null;
  username?: string;
}

export interface StepWords {
  step: number | null;
  words: SpokenWord[];
}

/** A word from a `transcript.words` event: `step` is the step the server attached it to. */
export interface LiveWord {
  word: string;
  start?: number;
  end?: number;
  step?: number | null;
}

const key = (word: { word: string; start: number }) => `${word.start.toFixed(3)}|${word.word}`;

function stepOf(word: LiveWord): number | null {
  return typeof word.step === "number" ? word.step : null;
}

/**
 * One list in spoken order. A word stored and also seen live appears once; the stored record
 * wins (steps are re-attached on the server as steps execute), except that a live step fills in
 * a stored word whose step the server has not attached yet.
 */
export function mergeWords(stored: TranscriptWordRecord[], live: LiveWord[]): SpokenWord[] {
  const byKey = new Map<string, SpokenWord>();
  for (const w of stored) {
    byKey.set(key(w), { word: w.word, start: w.start, end: w.end, step: w.step ?? null, username: w.username });
  }
  for (const w of live) {
    if (typeof w.start !== "number" || typeof w.word !== "string") continue;
    const word: SpokenWord = { word: w.word, start: w.start, end: typeof w.end === "number" ? w.end : w.start, step: stepOf(w) };
    const seen = byKey.get(key(word));
    if (!seen) byKey.set(key(word), word);
    else if (seen.step === null && word.step !== null) seen.step = word.step;
  }
  return [...byKey.values()].sort((a, b) => a.start - b.start || a.end - b.end);
}

/** Words grouped by step, steps in order; words not yet attached to a step come last. */
export function groupByStep(words: SpokenWord[]): StepWords[] {
  const groups = new Map<number | null, SpokenWord[]>();
  for (const word of words) {
    const list = groups.get(word.step);
    if (list) list.push(word);
    else groups.set(word.step, [word]);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => (a === null ? 1 : b === null ? -1 : a - b))
    .map(([step, list]) => ({ step, words: list }));
}

/** The text of a group, as said ("I think it should scroll down"). */
export function wordsText(words: SpokenWord[]): string {
  return words
    .map((w) => w.word.trim())
    .filter(Boolean)
    .join(" ");
}
