/** One episode as server state, shared by the shell (which project an episode page is in) and the live session page. */
import { useQuery } from "@tanstack/react-query";
import { episodeGet, episodeKeys } from "../api/episodes";

/** How often a page asks again while an episode waits: nothing is pushed when *other* episodes start. */
export const QUEUE_POLL_MS = 3_000;

/**
 * One episode with its steps. While it is queued it is asked again every few seconds: its place in
 * line changes when *other* episodes start, and its own socket says nothing about those.
 */
export function useEpisode(episodeId: number) {
  return useQuery({
    queryKey: episodeKeys.detail(episodeId),
    queryFn: ({ signal }) => episodeGet(episodeId, signal),
    enabled: Number.isFinite(episodeId),
    refetchInterval: (query) => (query.state.data?.status === "queued" ? QUEUE_POLL_MS : false),
  });
}
