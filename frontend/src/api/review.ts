/**
 * The review endpoints and their shapes (flywheel/api.py, annotation/api.py): the filtered episode
 * list (keyset pages), an episode's neighbours in that list, its replay (steps, transcript, audio
 * clips) and its reviews.
 */
import { apiFetch } from "./client";
import type {
  Action,
  AudioClip as AudioClipRecord,
  Episode,
  Split,
  Step,
  Transcript as TranscriptRecord,
  TranscriptWordRecord,
} from "./types";

export type ReviewStatus = "unreviewed" | "accepted" | "rejected" | "disputed";
export type Verdict = "accept" | "reject";
export type StepLabel = "good" | "wasteful" | "wrong" | "critical";

export const REVIEW_STATUSES: ReviewStatus[] = ["unreviewed", "accepted", "rejected", "disputed"];

export interface ReviewSummary {
  reviews?: number;
  accepts?: number;
  rejects?: number;
  grade_mean?: number | null;
}

/** An episode as the review list shows it (the API's episode payload). */
export interface ReviewEpisode extends Episode {
  task: { id: number; task_name: string; env_kind: string; split?: Split };
  created_by: { id: number; username: string } | null;
  n_interventions: number;
  n_void: number;
  review_status: ReviewStatus;
  review_summary: ReviewSummary;
}

/** The model's turn that a person overrode, as stored (`turn_payload`). */
export interface StoredProposal {
  thought?: string;
  action?: Action | null;
  action_text?: string;
  raw?: string;
  void_reason?: string | null;
}

export interface ReplayStep extends Omit<Step, "proposal"> {
  proposal: StoredProposal | null;
}

export interface ReplayEpisode extends ReviewEpisode {
  steps: ReplayStep[];
}

export interface ListPage {
  results: ReviewEpisode[];
  next: string | null;
  previous: string | null;
}

export interface Neighbours {
  previous: number | null;
  next: number | null;
}

/** A transcribed word as the transcript API gives it: session-clock times and the step it was aligned to. */
export interface TranscriptWord extends TranscriptWordRecord {
  probability: number;
  clip: number;
  username: string;
}

export interface AudioClip extends AudioClipRecord {
  /** Session-clock time of the clip's audio time 0 (its first chunk's start). */
  origin: number;
}

/**
 * `GET episodes/<id>/transcript` as the replay reads it: every field the server fills for a
 * stored transcript (the live page reads the same endpoint through `api/audio.ts`).
 */
export interface Transcript extends TranscriptRecord {
  words: TranscriptWord[];
  clips: AudioClip[];
}

export interface Review {
  id: number;
  episode: number;
  reviewer: { id: number; username: string };
  verdict: Verdict;
  grade: number | null;
  step_labels: Record<string, StepLabel>;
  comment: string;
  created_at: string;
  updated_at: string;
}

export interface ReviewInput {
  verdict: Verdict;
  grade: number | null;
  step_labels: Record<string, StepLabel>;
  comment: string;
}

export interface ReviewSubmitted extends Review {
  review_status: ReviewStatus;
  review_summary: ReviewSummary;
}

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
