/**
 * The dataset endpoints and their shapes (flywheel/api_datasets.py, flywheel/datasets.py): the project's
 * validator V and bucket counts (`/routing`) and its frozen snapshots.
 */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type SnapshotKind = Schemas["KindEnum"];
export type Rule = Schemas["RuleEnum"];
export type SnapshotStatus = Schemas["SnapshotStatusEnum"];
export type Bucket = Schemas["BucketOutput"];
export type Routing = Schemas["RoutingOutput"];
export type RoutingInput = Schemas["PatchedRoutingInputRequest"];
export type SnapshotFilter = Schemas["SnapshotFilterOutput"];
export type Snapshot = Schemas["SnapshotOutput"];
export type SnapshotInput = Schemas["SnapshotCreateInputRequest"];

export const datasetKeys = {
  routing: (projectId: number) => ["project", projectId, "routing"] as const,
  snapshots: (projectId: number) => ["project", projectId, "snapshots"] as const,
};

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
