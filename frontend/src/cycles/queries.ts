/**
 * Server state of the Cycles page: the project's cycles (polled while one runs), its cycle settings and
 * the actions on them. Deployments come from the Runs page's hook (runs/queries.ts).
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import {
  type Cycle,
  cycleApprove,
  cycleKeys,
  cycleList,
  cycleReject,
  cycleSettingsGet,
  type CycleSettingsInput,
  cycleSettingsUpdate,
  cycleStart,
} from "../api/cycles";
import { deploymentKeys, deploymentRollback } from "../api/deployments";
import { runKeys } from "../api/runs";
import { isCycleActive } from "./cycleView";

export const CYCLE_POLL_MS = 2_000;

/** The project's cycles, newest first, polled every 2 s while one of them runs. */
export function useCycles(projectId: number) {
  return useQuery({
    queryKey: cycleKeys.list(projectId),
    queryFn: ({ signal }) => cycleList(projectId, signal),
    enabled: Number.isFinite(projectId),
    staleTime: 0,
    // a candidate awaiting a manager changes only when someone acts here, so it is not polled for
    refetchInterval: (query) =>
      query.state.data?.some((c) => isCycleActive(c) && !c.awaiting_approval) ? CYCLE_POLL_MS : false,
  });
}

export function useCycleSettings(projectId: number) {
  return useQuery({
    queryKey: cycleKeys.settings(projectId),
    queryFn: ({ signal }) => cycleSettingsGet(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

/** After anything that changes cycles or deployments, read them again. */
function useRefresh(projectId: number) {
  const client = useQueryClient();
  return () => {
    for (const key of [cycleKeys.list(projectId), deploymentKeys.list(projectId), runKeys.list(projectId), cycleKeys.settings(projectId)]) {
      void client.invalidateQueries({ queryKey: key });
    }
  };
}

export function useStartCycle(projectId: number) {
  const refresh = useRefresh(projectId);
  return useMutation({ mutationFn: () => cycleStart(projectId), onSettled: refresh });
}

export function useApproveCycle(projectId: number) {
  const refresh = useRefresh(projectId);
  return useMutation({ mutationFn: (cycle: Cycle) => cycleApprove(cycle.id), onSettled: refresh });
}

export function useRejectCycle(projectId: number) {
  const refresh = useRefresh(projectId);
  return useMutation({
    mutationFn: ({ cycle, reason }: { cycle: Cycle; reason: string }) => cycleReject(cycle.id, reason),
    onSettled: refresh,
  });
}

export function useSaveCycleSettings(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (changes: CycleSettingsInput) => cycleSettingsUpdate(projectId, changes),
    onSuccess: (data) => client.setQueryData(cycleKeys.settings(projectId), data),
  });
}

export function useRollback(projectId: number) {
  const refresh = useRefresh(projectId);
  return useMutation({ mutationFn: (deploymentId: number) => deploymentRollback(projectId, deploymentId), onSettled: refresh });
}
