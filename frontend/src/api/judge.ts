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
