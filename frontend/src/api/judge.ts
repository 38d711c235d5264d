/**
 * The judge's endpoints (flywheel/api.py, flywheel/judge.py): an episode's judgements, judging it again,
 * and the calibration of the judge against the reviewers. Managers only.
 */
import { apiFetch } from "./client";

/** "" is no verdict: the judge could not be read (garbage, a timeout) or its samples tied. */
export type JudgeVerdict = "success" | "failure" | "";

export interface JudgeVote {
  verdict: JudgeVerdict;
  reason: string;
  raw: string;
}

export interface Judgement {
  id: number;
  episode: number;
  verdict: JudgeVerdict;
  reason: string;
  /** Share of the samples that voted the verdict; null for no verdict. */
  confidence: number | null;
  votes: JudgeVote[];
  judge: "rule" | "openai" | "scripted";
  model: string;
  latest: boolean;
  created_by: { id: number; username: string } | null;
  created_at: string;
}

export interface Confusion {
  judge_success_review_accept: number;
  judge_success_review_reject: number;
  judge_failure_review_accept: number;
  judge_failure_review_reject: number;
}

export interface Agreement {
  episodes: number;
  agreement: number | null;
  kappa: number | null;
  confusion: Confusion;
}

export interface Calibration extends Agreement {
  judged: number;
  no_verdict: number;
  not_reviewed: number;
  tasks: (Agreement & { task: string })[];
}

export const judgementList = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<{ results: Judgement[] }>(`episodes/${episodeId}/judgements/`, { signal }).then((r) => r.results);

/** Queue a new judgement of a finished episode (the `default` worker runs it). */
export const judgeEpisode = (episodeId: number) =>
  apiFetch<{ queued: number[] }>(`episodes/${episodeId}/judgements/`, { method: "POST" });

export const calibrationGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Calibration>(`projects/${projectId}/judge/calibration`, { signal });

export type JudgeBackend = "rule" | "openai" | "scripted";

/** The project's judge (GET/PATCH projects/<id>/judge, flywheel/judge.py); PATCH sends only what changes. */
export interface JudgeSettings {
  /** Judge every episode that finishes. */
  enabled: boolean;
  backend: JudgeBackend;
  /** k: how many times the judge is asked; the majority wins and its share is the confidence. */
  samples: number;
  temperature: number;
  /** How many of the episode's last screenshots the judge sees. */
  screenshots: number;
  model: string;
  base_url: string;
  timeout_seconds: number | null;
  retries: number | null;
  answers: string[];
}

export const judgeSettingsGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<JudgeSettings>(`projects/${projectId}/judge`, { signal });

export const judgeSettingsSet = (projectId: number, changes: Partial<JudgeSettings>) =>
  apiFetch<JudgeSettings>(`projects/${projectId}/judge`, { method: "PATCH", body: changes });
