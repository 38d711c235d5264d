/**
 * The query keys of the server state: one factory a resource, so each cache entry has one shape and an
 * invalidation names what it refreshes. What belongs to a project is keyed under `["project", id, ...]`, what belongs
 * to an episode under `["episode", id, ...]`, another record reached by its own id under its own name
 * (`["review-queue", id]`), lists across projects under theirs. A key is a prefix of the longer ones that start with
 * it: invalidating `episodeKeys.lists()` refreshes every episode list.
 */
import type { EpisodeFilter } from "./client";

export const sessionKeys = {
  /** Who is logged in (null when no one is). */
  current: () => ["session"] as const,
};

export const healthKeys = {
  report: () => ["health"] as const,
};

export const projectKeys = {
  list: () => ["projects"] as const,
  detail: (projectId: number) => ["project", projectId] as const,
  members: (projectId: number) => ["project", projectId, "members"] as const,
};

export const taskKeys = {
  list: (projectId: number) => ["project", projectId, "tasks"] as const,
  /** Each env kind's shipped tasks (the same for every project). */
  catalogue: () => ["tasks", "catalogue"] as const,
};

export const episodeKeys = {
  /** Every list of episodes (the prefix of the two below). */
  lists: () => ["episodes"] as const,
  /** A filtered list, page by page. */
  list: (filter: EpisodeFilter) => ["episodes", filter] as const,
  /** The first page of a filtered list, as the annotator's queue of live episodes polls it. */
  live: (filter: EpisodeFilter) => ["episodes", filter, "live"] as const,
  /** One episode with its steps, as the live session reads it. */
  detail: (episodeId: number) => ["episode", episodeId] as const,
  /** The stored think-aloud transcript, as the live session reads it (asked again on every reconnect). */
  transcript: (episodeId: number) => ["episode", episodeId, "transcript"] as const,
};

export const reviewKeys = {
  /** Every page of the review list, whatever its filters. */
  lists: () => ["review-list"] as const,
  list: (params: Record<string, string>) => ["review-list", params] as const,
  neighbours: (episodeId: number, params: Record<string, string>) =>
    ["episode", episodeId, "neighbours", params] as const,
  /** The episode with its steps, as the replay reads it. */
  replay: (episodeId: number) => ["episode", episodeId, "replay"] as const,
  /** The transcript and audio clips, as the replay reads them. */
  replayTranscript: (episodeId: number) => ["episode", episodeId, "replay-transcript"] as const,
  reviews: (episodeId: number) => ["episode", episodeId, "reviews"] as const,
};

export const branchKeys = {
  list: (episodeId: number) => ["episode", episodeId, "branches"] as const,
  comparison: (branchId: number) => ["episode", branchId, "comparison"] as const,
};

export const judgeKeys = {
  judgements: (episodeId: number) => ["episode", episodeId, "judgements"] as const,
  settings: (projectId: number) => ["project", projectId, "judge-settings"] as const,
  calibration: (projectId: number) => ["project", projectId, "judge-calibration"] as const,
};

export const polishKeys = {
  episode: (episodeId: number) => ["episode", episodeId, "polish"] as const,
};

export const queueKeys = {
  list: (projectId: number) => ["project", projectId, "review-queues"] as const,
  detail: (queueId: number) => ["review-queue", queueId] as const,
};

export const datasetKeys = {
  routing: (projectId: number) => ["project", projectId, "routing"] as const,
  snapshots: (projectId: number) => ["project", projectId, "snapshots"] as const,
};

export const dashboardKeys = {
  detail: (projectId: number) => ["project", projectId, "dashboard"] as const,
};

export const runKeys = {
  list: (projectId: number) => ["project", projectId, "runs"] as const,
};

export const deploymentKeys = {
  list: (projectId: number) => ["project", projectId, "deployments"] as const,
};

export const cycleKeys = {
  list: (projectId: number) => ["project", projectId, "cycles"] as const,
  settings: (projectId: number) => ["project", projectId, "cycle-settings"] as const,
};
