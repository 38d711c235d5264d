/**
 * The dataset endpoints and their shapes (flywheel/api.py, flywheel/datasets.py): the project's
 * validator V and bucket counts (`/routing`) and its frozen snapshots.
 */
import { apiFetch } from "./client";

export type SnapshotKind = "sft" | "dpo" | "rl" | "ct" | "prm";
export type Rule = "reward" | "review" | "both" | "judge" | "reward_or_judge" | "judge_and_review";
export type SnapshotStatus = "building" | "ready" | "failed";

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

export type RoutingInput = Partial<Pick<Routing, "rule" | "reward_threshold">>;

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

export interface SnapshotInput {
  kind: SnapshotKind;
  name: string;
  filter: SnapshotFilter;
}

export const routingGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Routing>(`projects/${projectId}/routing`, { signal });

export const routingUpdate = (projectId: number, changes: RoutingInput) =>
  apiFetch<Routing>(`projects/${projectId}/routing`, { method: "PATCH", body: changes });

/** The project's snapshots, newest first. */
export const snapshotList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<{ results: Snapshot[] }>(`projects/${projectId}/snapshots/`, { signal }).then((r) => r.results);

/** Freeze a snapshot; the same data frozen before answers with that snapshot (`duplicate`). */
export const snapshotCreate = (projectId: number, request: SnapshotInput) =>
  apiFetch<Snapshot>(`projects/${projectId}/snapshots/`, { method: "POST", body: request });
