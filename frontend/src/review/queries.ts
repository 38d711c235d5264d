/**
 * Server state of the review pages: the filtered episode list (keyset pages), an episode's
 * neighbours in that list, its replay (steps, transcript, audio clips) and its reviews. The calls
 * and their shapes are in api/review.ts (the episode and its transcript: api/episodes.ts and api/audio.ts, under the
 * replay's own keys).
 */
import { keepPreviousData, useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { transcriptGet } from "../api/audio";
import { deploymentKeys, deploymentList } from "../api/deployments";
import { episodeGet } from "../api/episodes";
import {
  episodeNeighbours,
  type ReplayEpisode,
  type ReviewInput,
  reviewKeys,
  reviewList,
  reviewListPage,
  reviewSubmit,
  type StepLabel,
} from "../api/review";

/** The step labels a reviewer chooses from, as the page writes them. */
export const STEP_LABELS: { value: StepLabel; label: string }[] = [
  { value: "good", label: "good" },
  { value: "wasteful", label: "wasteful" },
  { value: "wrong", label: "wrong" },
  { value: "critical", label: "critical error" },
];

/** One keyset page of the review list; `params` holds the project, the filters and the cursor. */
export function useReviewList(params: Record<string, string>) {
  return useQuery({
    queryKey: reviewKeys.list(params),
    queryFn: ({ signal }) => reviewListPage(params, signal),
    placeholderData: keepPreviousData,
  });
}

/** The episodes before and after this one in the list with the same filters. */
export function useNeighbours(episodeId: number, params: Record<string, string>) {
  return useQuery({
    queryKey: reviewKeys.neighbours(episodeId, params),
    queryFn: ({ signal }) => episodeNeighbours(episodeId, params, signal),
    enabled: Number.isFinite(episodeId),
  });
}

export function useReplay(episodeId: number) {
  return useQuery({
    queryKey: reviewKeys.replay(episodeId),
    queryFn: ({ signal }) => episodeGet(episodeId, signal),
    enabled: Number.isFinite(episodeId),
  });
}

export function useTranscript(episodeId: number) {
  return useQuery({
    queryKey: reviewKeys.replayTranscript(episodeId),
    queryFn: ({ signal }) => transcriptGet(episodeId, signal),
    enabled: Number.isFinite(episodeId),
  });
}

export function useReviews(episodeId: number) {
  return useQuery({
    queryKey: reviewKeys.reviews(episodeId),
    queryFn: ({ signal }) => reviewList(episodeId, signal),
    enabled: Number.isFinite(episodeId),
  });
}

/** Create or replace the caller's review (the API keeps one per reviewer and episode). */
export function useSubmitReview(episodeId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (review: ReviewInput) => reviewSubmit(episodeId, review),
    onSuccess: (saved) => {
      client.setQueryData<ReplayEpisode>(reviewKeys.replay(episodeId), (old) =>
        old ? { ...old, review_status: saved.review_status, review_summary: saved.review_summary } : old,
      );
      client.invalidateQueries({ queryKey: reviewKeys.reviews(episodeId) });
      client.invalidateQueries({ queryKey: reviewKeys.lists() });
    },
  });
}

/**
 * The checkpoints that can have acted in this project: every one that was ever deployed (only a
 * deployed checkpoint runs episodes), newest deployment first.
 */
export function useCheckpoints(projectId: number): { id: number; name: string }[] {
  const deployments = useQuery({
    queryKey: deploymentKeys.list(projectId),
    queryFn: ({ signal }) => deploymentList(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
  const seen = new Map<number, { id: number; name: string }>();
  for (const d of deployments.data ?? []) if (!seen.has(d.checkpoint.id)) seen.set(d.checkpoint.id, d.checkpoint);
  return [...seen.values()];
}
