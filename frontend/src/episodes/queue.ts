/**
 * A queued episode's place in line, in words. Supervised episodes wait for a live slot (workers kept
 * for people); autonomous ones for a rollout worker. The server counts, per lane, the episodes queued
 * before this one (`ahead`) and those running now (`running`).
 */
import type { Episode, EpisodeQueue } from "../api/episodes";

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

function slotOf(queue: EpisodeQueue | null | undefined): string {
  return queue?.lane === "machines" ? "a free rollout worker" : "a free live slot";
}

/** "2 episodes ahead of yours (2 running)" or "next in line (1 running)". */
export function placeInLine(queue: EpisodeQueue): string {
  const running = queue.running > 0 ? ` (${queue.running} running)` : "";
  if (queue.ahead <= 0) return `next in line${running}`;
  return `${plural(queue.ahead, "episode", "episodes")} ahead of yours${running}`;
}

/** The waiting card's sentence on the live session page. */
export function waitingText(queue: EpisodeQueue | null | undefined): string {
  if (!queue) return "Starting… waiting for a worker to pick this episode up.";
  if (queue.ahead <= 0) {
    return `Starting… next in line for ${slotOf(queue)}${queue.running > 0 ? ` (${queue.running} running)` : ""}.`;
  }
  return `Starting… waiting for ${slotOf(queue)}: ${placeInLine(queue)}.`;
}

/** The short line a list shows beside a queued episode ("2 ahead · 2 running", "next in line"). */
export function queueShort(episode: Pick<Episode, "status" | "queue">): string {
  if (episode.status !== "queued") return "";
  const queue = episode.queue;
  if (!queue) return "waiting for a worker";
  const running = queue.running > 0 ? ` · ${queue.running} running` : "";
  return queue.ahead <= 0 ? `next in line${running}` : `${queue.ahead} ahead${running}`;
}
