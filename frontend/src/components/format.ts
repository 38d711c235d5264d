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
