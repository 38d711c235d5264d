/**
 * Server state of the Datasets page: the project's validator V and bucket counts (`/routing`),
 * snapshots (polled while one builds), and training on a ready snapshot. Shapes follow
 * flywheel/api.py and flywheel/datasets.py.
 */
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { apiFetch } from "../api/client";
import type { TrainingRun } from "../api/types";

export type SnapshotKind = "sft" | "dpo" | "rl" | "ct";
export type Rule = "reward" | "review" | "both";
export type SnapshotStatus = "building" | "ready" | "failed";

export const SNAPSHOT_KINDS: { kind: SnapshotKind; label: string; help: string }[] = [
  { kind: "sft", label: "SFT", help: "V=1 episodes, every non-void step a row (autonomous successes are the RFT part)" },
  { kind: "dpo", label: "DPO", help: "every edited step: the person's correction over the model's proposal" },
  { kind: "rl", label: "RL", help: "whole autonomous episodes with their rewards and logprobs" },
  { kind: "ct", label: "CT", help: "V=0 episodes, for continual training on what went wrong" },
];

export interface Bucket {
  rows: number;
  episodes: number;
  /** Rows of episodes that no ready snapshot of this kind holds yet. */
  new_rows: number;
}

export interface Routing {
  rule: Rule;
  reward_threshold: number;
  buckets: Record<SnapshotKind | "rft", Bucket>;
}

export interface SnapshotFilter {
  tasks?: number[];
  split?: string;
  checkpoint?: number;
  mode?: string;
  created_after?: string;
  created_before?: string;
  only_new?: boolean;
}

export interface Snapshot {
  id: number;
  project: number;
  kind: SnapshotKind;
  name: string;
  filter: SnapshotFilter;
  routing: { rule?: Rule; reward_threshold?: number };
  status: SnapshotStatus;
  /** 0..1 */
  progress: number;
  error: string;
  rows: number;
  episodes: number;
  sha256: string;
  size_bytes: number;
  lineage: { tasks?: Record<string, number>; checkpoints?: Record<string, number> };
  created_by: { id: number; username: string } | null;
  created_at: string;
  /** When a worker began writing it; null while it waits for one. */
  started_at: string | null;
  finished_at: string | null;
  export_url: string;
  /** In a freeze's answer: the same data (kind, filter, routing, episodes) is already frozen or being frozen as this one. */
  duplicate?: boolean;
}

export const routingKey = (projectId: number) => ["project", projectId, "routing"] as const;
export const snapshotsKey = (projectId: number) => ["project", projectId, "snapshots"] as const;
export const SNAPSHOT_POLL_MS = 1_000;

export function useRouting(projectId: number) {
  return useQuery({
    queryKey: routingKey(projectId),
    queryFn: ({ signal }) => apiFetch<Routing>(`projects/${projectId}/routing`, { signal }),
    enabled: Number.isFinite(projectId),
  });
}

export function useSetRouting(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (changes: { rule?: Rule; reward_threshold?: number }) =>
      apiFetch<Routing>(`projects/${projectId}/routing`, { method: "PATCH", body: changes }),
    onSuccess: (routing) => {
      client.setQueryData(routingKey(projectId), routing);
      client.invalidateQueries({ queryKey: ["project", projectId, "dashboard"] });
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
    queryKey: snapshotsKey(projectId),
    queryFn: ({ signal }) =>
      apiFetch<{ results: Snapshot[] }>(`projects/${projectId}/snapshots/`, { signal }).then((r) => r.results),
    enabled: Number.isFinite(projectId),
    staleTime: 0,
    refetchInterval: (q) => (q.state.data?.some((s) => s.status === "building") ? SNAPSHOT_POLL_MS : false),
  });
  const building = query.data?.filter((s) => s.status === "building").length ?? 0;
  const wasBuilding = useRef(building);
  useEffect(() => {
    if (building < wasBuilding.current) {
      client.invalidateQueries({ queryKey: routingKey(projectId) });
      client.invalidateQueries({ queryKey: ["project", projectId, "dashboard"] });
    }
    wasBuilding.current = building;
  }, [building, client, projectId]);
  return query;
}

export function useCreateSnapshot(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (request: { kind: SnapshotKind; name: string; filter: SnapshotFilter }) =>
      apiFetch<Snapshot>(`projects/${projectId}/snapshots/`, { method: "POST", body: request }),
    onSuccess: (snapshot) => {
      // A new snapshot goes on top at once; a duplicate is one the list already holds, where it is.
      if (!snapshot.duplicate) {
        client.setQueryData<Snapshot[]>(snapshotsKey(projectId), (old) => [snapshot, ...(old ?? []).filter((s) => s.id !== snapshot.id)]);
      }
      client.invalidateQueries({ queryKey: snapshotsKey(projectId) });
    },
  });
}

export function useTrainOnSnapshot(projectId: number) {
  const client = useQueryClient();
  return useMutation({
    mutationFn: (snapshotId: number) =>
      apiFetch<TrainingRun>(`projects/${projectId}/runs/`, { method: "POST", body: { snapshot: snapshotId } }),
    onSuccess: () => client.invalidateQueries({ queryKey: ["project", projectId, "runs"] }),
  });
}
