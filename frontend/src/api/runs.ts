/** Training runs (flywheel/api_runs.py): a project's runs, and training on a ready snapshot. */
import { apiFetch, type Page } from "./client";
import type { Schemas } from "./types";

export type RunStatus = Schemas["RunStatusEnum"];
/** One progress line of the trainer: `loss` at `step` of `total`, in a `phase` (demos, sft, dpo...). */
export type RunMetric = Schemas["RunMetricOutput"];
export type TrainingRun = Schemas["RunOutput"];

export const runKeys = {
  list: (projectId: number) => ["project", projectId, "runs"] as const,
};

export const runList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<TrainingRun>>(`projects/${projectId}/runs/`, { signal }).then((page) => page.results);

/** Train on a ready snapshot (managers); the run is queued. */
export const runCreate = (projectId: number, snapshotId: number) =>
  apiFetch<TrainingRun>(`projects/${projectId}/runs/`, { method: "POST", body: { snapshot: snapshotId } });
