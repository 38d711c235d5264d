/**
 * Server state of the review pages: the filtered episode list (keyset pages), an episode's
 * neighbours in that list, its replay (steps, transcript, audio clips) and its reviews.
 * Shapes follow flywheel/api.py and annotation/api.py.
 */
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { apiFetch, deploymentList } from "../api/client";
import type {
  Action,
  AudioClip as AudioClipRecord,
  Episode,
  Split,
  Step,
  Transcript as TranscriptRecord,
  TranscriptWordRecord,
} from "../api/types";

export type ReviewStatus = "unreviewed" | "accepted" | "rejected" | "disputed";
export type Verdict = "accept" | "reject";
export type StepLabel = "good" | "wasteful" | "wrong" | "critical";

export const REVIEW_STATUSES: ReviewStatus[] = ["unreviewed", "accepted", "rejected", "disputed"];
export const STEP_LABELS: { value: StepLabel; label: string }[] = [
  { value: "good", label: "good" },
  { value: "wasteful", label: "wasteful" },
  { value: "wrong", label: "wrong" },
  { value: "critical", label: "critical error" },
];

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

export const reviewListKey = (params: Record<string, string>) => ["review-list", params] as const;
export const replayKey = (episodeId: number) => ["replay", episodeId] as const;
export const reviewsKey = (episodeId: number) => ["reviews", episodeId] as const;

/** One keyset page of the review list; `params` holds the project, the filters and the cursor. */
export function useReviewList(params: Record<string, string>) {
  return useQuery({
    queryKey: reviewListKey(params),
    queryFn: ({ signal }) => apiFetch<ListPage>(`episodes/${search(params)}`, { signal }),
    placeholderData: keepPreviousData,
  });
}

/** The episodes before and after this one in the list with the same filters. */
export function useNeighbours(episodeId: number, params: Record<string, string>) {
  return useQuery({
    queryKey: ["neighbours", episodeId, params],
    queryFn: ({ signal }) => apiFetch<Neighbours>(`episodes/${episodeId}/neighbours${search(params)}`, { signal }),
    enabled: Number.isFinite(episodeId),
  });
}

export function useReplay(episodeId: number) {
  return useQuery({
    queryKey: replayKey(episodeId),
    queryFn: ({ signal }) => apiFetch<ReplayEpisode>(`episodes/${episodeId}/`, { signal }),
    enabled: Number.isFinite(episodeId),
  });
}

export function useTranscript(episodeId: number) {
  return useQuery({
    queryKey: ["transcript", episodeId],
    queryFn: ({ signal }) => apiFetch<Transcript>(`episodes/${episodeId}/transcript`, { signal }),
    enabled: Number.isFinite(episodeId),
  });
}

export function useReviews(episodeId: number) {
  return useQuery({
    queryKey: reviewsKey(episodeId),
    queryFn: ({ signal }) =>
      apiFetch<{ results: Review[] }>(`episodes/${episodeId}/reviews/`, { signal }).then((r) => r.results),
    enabled: Number.isFinite(episodeId),
  });
}

/** Create or replace the caller's review (the API keeps one per reviewer and episode). */
export function useSubmitReview(episodeId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (review: ReviewInput) =>
      apiFetch<ReviewSubmitted>(`episodes/${episodeId}/review`, { method: "PUT", body: review }),
    onSuccess: (saved) => {
      client.setQueryData<ReplayEpisode>(replayKey(episodeId), (old) =>
        old ? { ...old, review_status: saved.review_status, review_summary: saved.review_summary } : old,
      );
      client.invalidateQueries({ queryKey: reviewsKey(episodeId) });
      client.invalidateQueries({ queryKey: ["review-list"] });
    },
  });
}

/**
 * The checkpoints that can have acted in this project: every one that was ever deployed (only a
 * deployed checkpoint runs episodes), newest deployment first.
 */
export function useCheckpoints(projectId: number): { id: number; name: string }[] {
  const deployments = useQuery({
    queryKey: ["project", projectId, "deployments"],
    queryFn: ({ signal }) => deploymentList(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
  const seen = new Map<number, { id: number; name: string }>();
  for (const d of deployments.data ?? []) if (!seen.has(d.checkpoint.id)) seen.set(d.checkpoint.id, d.checkpoint);
  return [...seen.values()];
}
