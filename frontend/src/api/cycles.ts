/** Flywheel cycles and their settings (flywheel/api_cycles.py; the page is frontend/src/cycles). */
import { apiFetch, type Page } from "./client";
import type { Schemas } from "./types";

export type CycleState = Schemas["CycleStateEnum"];
export type TrainAlgorithm = Schemas["AlgorithmEnum"];
/** One stage of a project's training recipe; stages run in order, each from the last one's output. */
export type RecipeStage = Schemas["StageOutput"];
export type TaskEvalSummary = Schemas["TaskEvalOutput"];
export type CycleEvaluation = Schemas["EvaluationOutput"];
export type CycleDecision = Schemas["CycleDecisionOutput"];
export type CycleGate = Schemas["GateOutput"];
export type CycleTiming = Schemas["CycleTimingOutput"];
export type Cycle = Schemas["CycleOutput"];
export type CycleSettings = Schemas["CycleSettingsOutput"];
export type CycleSettingsInput = Schemas["PatchedCycleSettingsInputRequest"];

export const cycleKeys = {
  list: (projectId: number) => ["project", projectId, "cycles"] as const,
  settings: (projectId: number) => ["project", projectId, "cycle-settings"] as const,
};

export const cycleList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<Cycle>>(`projects/${projectId}/cycles/`, { signal }).then((page) => page.results);

/** Run a cycle now (managers); 409 while one runs. */
export const cycleStart = (projectId: number) => apiFetch<Cycle>(`projects/${projectId}/cycles/`, { method: "POST" });

export const cycleApprove = (cycleId: number) => apiFetch<Cycle>(`cycles/${cycleId}/approve`, { method: "POST" });

export const cycleReject = (cycleId: number, reason: string) =>
  apiFetch<Cycle>(`cycles/${cycleId}/reject`, { method: "POST", body: { reason } });

export const cycleSettingsGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<CycleSettings>(`projects/${projectId}/cycle-settings`, { signal });

export const cycleSettingsUpdate = (projectId: number, changes: CycleSettingsInput) =>
  apiFetch<CycleSettings>(`projects/${projectId}/cycle-settings`, { method: "PATCH", body: changes });
