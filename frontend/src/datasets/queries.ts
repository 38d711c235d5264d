/**
 * Server state of the Datasets page: the project's validator V and bucket counts (`/routing`),
 * snapshots (polled while one builds), and training on a ready snapshot. The calls and their
 * shapes are in api/datasets.ts.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { runCreate, runKeys } from "../api/runs";
import { dashboardKeys } from "../api/dashboard";
import {
  datasetKeys,
  routingGet,
  type RoutingInput,
  routingUpdate,
  type Snapshot,
  snapshotCreate,
  type SnapshotInput,
  type SnapshotKind,
  snapshotList,
} from "../api/datasets";

export const SNAPSHOT_KINDS: { kind: SnapshotKind; label: string; help: string }[] = [
  { kind: "sft", label: "SFT", help: "V=1 episodes, every non-void step a row (autonomous successes are the RFT part)" },
  {
    kind: "dpo",
    label: "DPO",
    help: "every edited step: the person's correction over the model's proposal; and a branch's step that acted otherwise than its parent on the same screen, the better episode's step preferred",
  },
  { kind: "rl", label: "RL", help: "each step of the autonomous episodes with a reward: GRPO samples fresh answers to it and the env scores them" },
  { kind: "ct", label: "CT", help: "V=0 episodes, for continual training on what went wrong" },
  {
    kind: "prm",
    label: "PRM",
    help: "process reward: each step reviewers labelled (good, or wasteful / wrong / critical: bad), up to an episode's first bad step, in TRL's prompt / completions / labels format",
  },
];

export const SNAPSHOT_POLL_MS = 1_000;

export function useRouting(projectId: number) {
  return useQuery({
    queryKey: datasetKeys.routing(projectId),
    queryFn: ({ signal }) => routingGet(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

export function useSetRouting(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (changes: RoutingInput) => routingUpdate(projectId, changes),
    onSuccess: (routing) => {
      client.setQueryData(datasetKeys.routing(projectId), routing);
      client.invalidateQueries({ queryKey: dashboardKeys.detail(projectId) });
    },
  });
}

/**
 * The project's snapshots, newest first, polled every second while one is building; when one
 * finishes the bucket counts ("new since the last snapshot") and the dashboard are refreshed.
 */
export function useSnapshots(projectId: number) {
  const client = useQueryClient();
  const query = useQuery({
    queryKey: datasetKeys.snapshots(projectId),
    queryFn: ({ signal }) => snapshotList(projectId, signal),
    enabled: Number.isFinite(projectId),
    staleTime: 0,
    refetchInterval: (q) => (q.state.data?.some((s) => s.status === "building") ? SNAPSHOT_POLL_MS : false),
  });
  const building = query.data?.filter((s) => s.status === "building").length ?? 0;
  const wasBuilding = useRef(building);
  useEffect(() => {
    if (building < wasBuilding.current) {
      client.invalidateQueries({ queryKey: datasetKeys.routing(projectId) });
      client.invalidateQueries({ queryKey: dashboardKeys.detail(projectId) });
    }
    wasBuilding.current = building;
  }, [building, client, projectId]);
  return query;
}

export function useCreateSnapshot(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (request: SnapshotInput) => snapshotCreate(projectId, request),
    onSuccess: (snapshot) => {
      // A new snapshot goes on top at once; a duplicate is one the list already holds, where it is.
      if (!snapshot.duplicate) {
        client.setQueryData<Snapshot[]>(datasetKeys.snapshots(projectId), (old) => [snapshot, ...(old ?? []).filter((s) => s.id !== snapshot.id)]);
      }
      client.invalidateQueries({ queryKey: datasetKeys.snapshots(projectId) });
    },
  });
}

export function useTrainOnSnapshot(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (snapshotId: number) => runCreate(projectId, snapshotId),
    onSuccess: () => client.invalidateQueries({ queryKey: runKeys.list(projectId) }),
  });
}
