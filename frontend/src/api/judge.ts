/**
 * The judge's endpoints (flywheel/api_judge.py, flywheel/judge.py): an episode's judgements, judging it again,
 * and the calibration of the judge against the reviewers. Managers only.
 */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

/** "" is no verdict: the judge could not be read (garbage, a timeout) or its samples tied. */
export type JudgeVerdict = Schemas["JudgementOutput"]["verdict"];
export type JudgeVote = Schemas["JudgeVoteOutput"];
export type Judgement = Schemas["JudgementOutput"];
export type Confusion = Schemas["ConfusionOutput"];
export type Agreement = Omit<Schemas["TaskJudgeAgreementOutput"], "task">;
export type Calibration = Schemas["CalibrationOutput"];

export const judgeKeys = {
  judgements: (episodeId: number) => ["episode", episodeId, "judgements"] as const,
  settings: (projectId: number) => ["project", projectId, "judge-settings"] as const,
  calibration: (projectId: number) => ["project", projectId, "judge-calibration"] as const,
};

export const judgementList = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<{ results: Judgement[] }>(`episodes/${episodeId}/judgements/`, { signal }).then((r) => r.results);

/** Queue a new judgement of a finished episode (the `default` worker runs it). */
export const judgeEpisode = (episodeId: number) =>
  apiFetch<{ queued: number[] }>(`episodes/${episodeId}/judgements/`, { method: "POST" });

export const calibrationGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Calibration>(`projects/${projectId}/judge/calibration`, { signal });

export type JudgeBackend = Schemas["JudgeBackendEnum"];

/** The project's judge (GET/PATCH projects/<id>/judge, flywheel/judge.py); PATCH sends only what changes. */
export type JudgeSettings = Schemas["JudgeSettingsOutput"];

export const judgeSettingsGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<JudgeSettings>(`projects/${projectId}/judge`, { signal });

export const judgeSettingsSet = (projectId: number, changes: Partial<JudgeSettings>) =>
  apiFetch<JudgeSettings>(`projects/${projectId}/judge`, { method: "PATCH", body: changes });
