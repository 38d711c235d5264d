/** Display helpers shared by the pages; one place so every page writes dates the same way. */

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : dateTime.format(date);
}

export function formatReward(reward: number | null | undefined): string {
  if (reward === null || reward === undefined) return "—";
  return Number.isInteger(reward) ? String(reward) : reward.toFixed(3);
}

/**
 * The number a person reads for a step. Steps are stored and sent from 0 (`index`, which data
 * attributes and commands keep); people count from 1. Every page that shows a step number calls
 * this, so the live session and the replay cannot disagree again.
 */
export function stepNumber(index: number): number {
  return index + 1;
}

/**
 * A length of audio as m:ss (h:mm:ss from an hour), or "—" when it is not known. Chromium reports
 * `duration === Infinity` for MediaRecorder's WebM until it has read to the end, and NaN before
 * the metadata: neither may reach the page as "Infinity" or "NaN".
 */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return "—";
  const whole = Math.round(seconds);
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  const s = String(whole % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`;
}

/** "1 step", "2 steps", "1,200 rows": a count with its noun, singular for one. */
export function countOf(count: number, noun: string, plural = `${noun}s`): string {
  return `${count.toLocaleString("en")} ${count === 1 ? noun : plural}`;
}
