/** Server state of the judge on the review pages: an episode's judgements and the judge's calibration. */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { calibrationGet, judgeEpisode, judgeKeys, judgementList } from "../api/judge";

/**
 * An episode's judgements, newest first. While a judgement asked for is on its way (`waitingFor`: how many there
 * were when it was asked), the list is polled each second until a newer one arrives.
 */
export function useJudgements(episodeId: number, waitingFor: number | null) {
  return useQuery({
    queryKey: judgeKeys.judgements(episodeId),
    queryFn: ({ signal }) => judgementList(episodeId, signal),
    enabled: Number.isFinite(episodeId),
    refetchInterval: (query) =>
      waitingFor !== null && (query.state.data?.length ?? 0) <= waitingFor ? 1000 : false,
  });
}

export function useJudgeEpisode(episodeId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: () => judgeEpisode(episodeId),
    onSuccess: () => client.invalidateQueries({ queryKey: judgeKeys.judgements(episodeId) }),
  });
}

export function useCalibration(projectId: number, enabled: boolean) {
  return useQuery({
    queryKey: judgeKeys.calibration(projectId),
    queryFn: ({ signal }) => calibrationGet(projectId, signal),
    enabled: enabled && Number.isFinite(projectId),
  });
}
