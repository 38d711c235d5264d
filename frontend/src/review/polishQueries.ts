/** Server state of the polished thoughts on the replay: the episode's polish, polled while a step is queued. */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { episodePolishGet, episodePolishRequest, polishKeys, stepPolishEdit, stepPolishRequest } from "../api/polish";

export function useEpisodePolish(episodeId: number | undefined) {
  return useQuery({
    queryKey: polishKeys.episode(episodeId ?? NaN),
    queryFn: ({ signal }) => episodePolishGet(episodeId as number, signal),
    enabled: episodeId !== undefined && Number.isFinite(episodeId),
    refetchInterval: (query) => (query.state.data?.progress.queued ? 1500 : false),
  });
}

export function usePolishEdit(episodeId: number, index: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (text: string) => stepPolishEdit(episodeId, index, text),
    onSuccess: () => client.invalidateQueries({ queryKey: polishKeys.episode(episodeId) }),
  });
}

export function usePolishStep(episodeId: number, index: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => stepPolishRequest(episodeId, index),
    onSuccess: () => client.invalidateQueries({ queryKey: polishKeys.episode(episodeId) }),
  });
}

export function usePolishEpisode(episodeId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => episodePolishRequest(episodeId),
    onSuccess: () => client.invalidateQueries({ queryKey: polishKeys.episode(episodeId) }),
  });
}
