import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { episodeGet, episodeListPage, type EpisodeFilter } from "../api/client";

export const episodesKey = (filter: EpisodeFilter) => ["episodes", filter] as const;
export const episodeKey = (episodeId: number) => ["episode", episodeId] as const;

/** Episodes page by page (keyset `next` links), newest first as the server orders them. */
export function useEpisodeList(filter: EpisodeFilter) {
  return useInfiniteQuery({
    queryKey: episodesKey(filter),
    queryFn: ({ pageParam, signal }) => episodeListPage(filter, pageParam, signal),
    initialPageParam: null as string | null,
    getNextPageParam: (last) => last.next,
    // Live sessions change state on their own; keep the list fresh while it is open.
    refetchInterval: 10_000,
  });
}

export function useEpisode(episodeId: number) {
  return useQuery({
    queryKey: episodeKey(episodeId),
    queryFn: ({ signal }) => episodeGet(episodeId, signal),
    enabled: Number.isFinite(episodeId),
  });
}
