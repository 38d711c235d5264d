/**
 * The review endpoints and their shapes (flywheel/api.py, annotation/api.py): the filtered episode
 * list (keyset pages), an episode's neighbours in that list and its reviews. The replay reads the
 * episode and its transcript through episodes.ts and audio.ts, under its own keys here.
 */
import { apiFetch } from "./client";
import type { EpisodeDetail, Step } from "./episodes";
import type { Schemas } from "./types";

export type ReviewStatus = Schemas["ReviewStatusEnum"];
export type ReviewSummary = Schemas["ReviewSummaryOutput"];
export type Verdict = Schemas["VerdictEnum"];
export type StepLabel = Schemas["ReviewOutput"]["step_labels"][string];

export const REVIEW_STATUSES: ReviewStatus[] = ["unreviewed", "accepted", "rejected", "disputed"];

/** An episode as the review list shows it (the API's episode payload). */
export type ReviewEpisode = Schemas["EpisodeOutput"];
export type ReplayStep = Step;
export type ReplayEpisode = EpisodeDetail;
export type ListPage = Schemas["EpisodePage"];
export type Neighbours = Schemas["EpisodeNeighboursOutput"];

export type Review = Schemas["ReviewOutput"];
export type ReviewInput = Schemas["ReviewInputRequest"];
export type ReviewSubmitted = Schemas["ReviewSubmittedOutput"];

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

function search(params: Record<string, string>): string {
  const text = new URLSearchParams(params).toString();
  return text ? `?${text}` : "";
}

/** The `cursor` of a `next` / `previous` link the API gave, to keep in the page's own URL. */
export function cursorOf(link: string | null): string | null {
  if (!link) return null;
  try {
    return new URL(link, "http://loupe.invalid").searchParams.get("cursor");
  } catch {
    return null;
  }
}

/** One keyset page of the review list; `params` holds the project, the filters and the cursor. */
export const reviewListPage = (params: Record<string, string>, signal?: AbortSignal) =>
  apiFetch<ListPage>(`episodes/${search(params)}`, { signal });

/** The episodes before and after this one in the list with the same filters. */
export const episodeNeighbours = (episodeId: number, params: Record<string, string>, signal?: AbortSignal) =>
  apiFetch<Neighbours>(`episodes/${episodeId}/neighbours${search(params)}`, { signal });

export const reviewList = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<{ results: Review[] }>(`episodes/${episodeId}/reviews/`, { signal }).then((r) => r.results);

/** Create or replace the caller's review (the API keeps one per reviewer and episode). */
export const reviewSubmit = (episodeId: number, review: ReviewInput) =>
  apiFetch<ReviewSubmitted>(`episodes/${episodeId}/review`, { method: "PUT", body: review });
