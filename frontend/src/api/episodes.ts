/**
 * Episodes (flywheel/api.py): the lists (keyset pages), one episode with its steps as the live session reads it,
 * and starting episodes. The review list and the replay read the same endpoints through review.ts.
 */
import { apiFetch, type Page, queryString } from "./client";
import type { Schemas } from "./types";

export type EpisodeMode = Schemas["ModeEnum"];
export type EpisodeStatus = Schemas["EpisodeStatusEnum"];
export type EpisodeOutcome = Schemas["EpisodeOutput"]["outcome"];

export const EPISODE_STATUSES: EpisodeStatus[] = [
  "queued",
  "running",
  "paused",
  "finished",
  "failed",
  "interrupted",
];
export const EPISODE_MODES: EpisodeMode[] = ["autonomous", "supervised"];

export type Episode = Schemas["EpisodeOutput"];
/** A queued episode's place in its lane (people's or machines'). */
export type EpisodeQueue = Schemas["EpisodeQueueOutput"];
/** An action as the parser stores it: `click(x=120, y=48)` is `{name: "click", args: {x: 120, y: 48}}`. */
export type Action = Schemas["ActionOutput"];
export type Actor = Schemas["ActorEnum"];
/** The model's turn that a person overrode, as stored. */
export type StoredProposal = Schemas["TurnOutput"];
/** A proposal of the model that a person rejected before its step ran (the model was asked again). */
export type Rejection = Schemas["RejectionOutput"];
export type Step = Schemas["StepOutput"];
export type EpisodeDetail = Schemas["EpisodeDetailOutput"];

export interface EpisodeFilter {
  project: number;
  status?: string;
  mode?: string;
}

export const episodeKeys = {
  /** Every list of episodes (the prefix of the two below). */
  lists: () => ["episodes"] as const,
  /** A filtered list, page by page. */
  list: (filter: EpisodeFilter) => ["episodes", filter] as const,
  /** The first page of a filtered list, as the annotator's queue of live episodes polls it. */
  live: (filter: EpisodeFilter) => ["episodes", filter, "live"] as const,
  /** One episode with its steps, as the live session reads it. */
  detail: (episodeId: number) => ["episode", episodeId] as const,
};

/** One page of episodes; pass the previous page's `next` URL as `pageUrl` to continue. */
export const episodeListPage = (filter: EpisodeFilter, pageUrl?: string | null, signal?: AbortSignal) =>
  apiFetch<Page<Episode>>(pageUrl ?? `episodes/${queryString({ ...filter })}`, { signal });

export const episodeGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<EpisodeDetail>(`episodes/${episodeId}/`, { signal });

export const episodeStart = (
  projectId: number,
  request: { task: number; seeds: number[]; mode: EpisodeMode },
) =>
  apiFetch<{ results: Episode[] }>(`projects/${projectId}/episodes/`, {
    method: "POST",
    body: request,
  });
