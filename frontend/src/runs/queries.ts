import { useQuery } from "@tanstack/react-query";
import { deploymentKeys, deploymentList } from "../api/deployments";
import { runKeys, runList, type TrainingRun } from "../api/runs";

export const RUN_POLL_MS = 2_000;

/** Whether a run may still change on its own, so the page should keep asking. */
export function isActive(run: TrainingRun): boolean {
  return run.status === "queued" || run.status === "running";
}

/** The project's runs, polled every 2 s while any of them is queued or running. */
export function useRuns(projectId: number) {
  return useQuery({
    queryKey: runKeys.list(projectId),
    queryFn: ({ signal }) => runList(projectId, signal),
    enabled: Number.isFinite(projectId),
    staleTime: 0,
    refetchInterval: (query) => (query.state.data?.some(isActive) ? RUN_POLL_MS : false),
  });
}

export function useDeployments(projectId: number, poll: boolean) {
  return useQuery({
    queryKey: deploymentKeys.list(projectId),
    queryFn: ({ signal }) => deploymentList(projectId, signal),
    enabled: Number.isFinite(projectId),
    // A run that finishes may deploy its checkpoint; follow along while runs are active.
    refetchInterval: poll ? RUN_POLL_MS * 5 : false,
  });
}
