/**
 * Asking a person when the policy is unsure (flywheel/api_asking.py): the project's confidence floor, the
 * calibration card (managers), and the person queue of episodes waiting on an ask (members).
 */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type AskSettings = Schemas["AskSettingsOutput"];
export type AskCalibration = Schemas["AskCalibrationOutput"];
export type AskWaiting = Schemas["AskWaitingOutput"];

export const askKeys = {
  settings: (projectId: number) => ["project", projectId, "ask-settings"] as const,
  calibration: (projectId: number) => ["project", projectId, "ask-calibration"] as const,
  waiting: (projectId: number) => ["project", projectId, "asks"] as const,
};

export const askSettingsGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<AskSettings>(`projects/${projectId}/asking`, { signal });

export const askSettingsSet = (projectId: number, changes: AskSettings) =>
  apiFetch<AskSettings>(`projects/${projectId}/asking`, { method: "PATCH", body: changes });

export const askCalibrationGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<AskCalibration>(`projects/${projectId}/asking/calibration`, { signal });

export const asksWaiting = (projectId: number, signal?: AbortSignal) =>
  apiFetch<AskWaiting[]>(`projects/${projectId}/asks`, { signal });
