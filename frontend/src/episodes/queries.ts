import { useInfiniteQuery, useQueries } from "@tanstack/react-query";
import { type Episode, type EpisodeFilter, episodeKeys, episodeListPage, type EpisodeStatus } from "../api/episodes";

/** Episodes page by page (keyset `next` links), newest first as the server orders them. */
export function useEpisodeList(filter: EpisodeFilter) {
  return useInfiniteQuery({
    queryKey: episodeKeys.list(filter),
    queryFn: ({ pageParam, signal }) => episodeListPage(filter, pageParam, signal),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next,
    // Live sessions change state on their own; keep the list fresh while it is open.
    refetchInterval: 10_000,
  });
}

/** Live first: paused episodes wait for a person, then running ones, then those about to start. */
export const LIVE_STATUSES: EpisodeStatus[] = ["paused", "running", "queued"];

/**
 * The annotator's queue: every live episode of the project (first page of each live status),
 * refreshed often because people join and leave them all the time.
 */
export function useLiveEpisodes(projectId: number) {
  const results = useQueries({
    queries: LIVE_STATUSES.map((status) => ({
      queryKey: episodeKeys.live({ project: projectId, status }),
      queryFn: ({ signal }: { signal: AbortSignal }) => episodeListPage({ project: projectId, status }, null, signal),
      enabled: Number.isFinite(projectId),
      refetchInterval: 5_000,
    })),
  });
  const episodes: Episode[] = results.flatMap((r) => r.data?.results ?? []);
  return {
    episodes,
    isPending: results.some((r) => r.isPending),
    error: results.find((r) => r.error)?.error ?? null,
    refetch: () => results.forEach((r) => r.refetch()),
  };
}
