/**
 * The review endpoints and their shapes (flywheel/api.py, annotation/api.py): the filtered episode
 * list (keyset pages), an episode's neighbours in that list, its replay (steps, transcript, audio
 * clips) and its reviews.
 */
import { apiFetch } from "./client";
import type { EpisodeDetail, ReviewStatus, Schemas, Step } from "./types";

export type { ReviewStatus, ReviewSummary, StoredProposal } from "./types";
export type Verdict = Schemas["VerdictEnum"];
export type StepLabel = Schemas["ReviewOutput"]["step_labels"][string];

export const REVIEW_STATUSES: ReviewStatus[] = ["unreviewed", "accepted", "rejected", "disputed"];

/** An episode as the review list shows it (the API's episode payload). */
export type ReviewEpisode = Schemas["EpisodeOutput"];
export type ReplayStep = Step;
export type ReplayEpisode = EpisodeDetail;
export type ListPage = Schemas["EpisodePage"];
export type Neighbours = Schemas["EpisodeNeighboursOutput"];

/** A transcribed word as the transcript API gives it: session-clock times and the step it was aligned to. */
export type TranscriptWord = Schemas["TranscriptWordOutput"];
export type AudioClip = Schemas["ClipOutput"];
/**
 * `GET episodes/<id>/transcript` as the replay reads it (the live page reads the same endpoint through
 * `api/audio.ts`).
 */
export type Transcript = Schemas["TranscriptOutput"];

export type Review = Schemas["ReviewOutput"];
export type ReviewInput = Schemas["ReviewInputRequest"];
export type ReviewSubmitted = Schemas["ReviewSubmittedOutput"];

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

export const replayGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<ReplayEpisode>(`episodes/${episodeId}/`, { signal });

export const replayTranscriptGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<Transcript>(`episodes/${episodeId}/transcript`, { signal });

export const reviewList = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<{ results: Review[] }>(`episodes/${episodeId}/reviews/`, { signal }).then((r) => r.results);

/** Create or replace the caller's review (the API keeps one per reviewer and episode). */
export const reviewSubmit = (episodeId: number, review: ReviewInput) =>
  apiFetch<ReviewSubmitted>(`episodes/${episodeId}/review`, { method: "PUT", body: review });
