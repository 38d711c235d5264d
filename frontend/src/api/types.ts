/**
 * Shapes of the records the Loupe API returns (see DESIGN.md "Contracts").
 * Kept beside the client so one edit follows an API change; names match the API's words.
 */

export type Role = "annotator" | "manager" | "admin";

export interface User {
  id: number;
  username: string;
  is_staff: boolean;
}

export interface Page<T> {
  results: T[];
  next: string | null;
}

export interface Project {
  id: number;
  slug: string;
  name: string;
  description: string;
  role: Role | null;
  created_at: string;
}

export interface Member {
  id: number;
  user: { id: number; username: string };
  role: Role;
}

export type Split = "train" | "eval";

export interface TaskSpec {
  id: number;
  env_kind: string;
  task_name: string;
  instruction_template: string;
  seed_start: number;
  seed_end: number;
  split: Split;
  max_steps: number;
}

export type TaskInput = Omit<TaskSpec, "id">;

export type EpisodeMode = "autonomous" | "supervised";
export type EpisodeStatus = "queued" | "running" | "paused" | "finished" | "failed" | "interrupted";
export type EpisodeOutcome = "" | "success" | "failure" | "infeasible";

export const EPISODE_STATUSES: EpisodeStatus[] = [
  "queued",
  "running",
  "paused",
  "finished",
  "failed",
  "interrupted",
];
export const EPISODE_MODES: EpisodeMode[] = ["autonomous", "supervised"];

export interface Episode {
  id: number;
  project: number;
  task: { id: number; task_name: string; env_kind: string };
  seed: number;
  mode: EpisodeMode;
  status: EpisodeStatus;
  outcome: EpisodeOutcome;
  reward: number | null;
  end_reason: string;
  checkpoint: { id: number; name: string } | null;
  n_steps: number;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** The one person steering the episode, when someone is. */
  control?: { username: string } | null;
  /** The index of the proposal waiting for a decision. */
  pending_index?: number | null;
  /** A person has taken over acting. */
  human_control?: boolean;
}

/** An action as the parser stores it: `click(x=120, y=48)` is `{name: "click", args: {x: 120, y: 48}}`. */
export interface Action {
  name: string;
  args: Record<string, unknown>;
}

export type Actor = "model" | "human" | "edited";

export interface Step {
  index: number;
  actor: Actor;
  thought: string;
  action: Action | null;
  action_text: string;
  void: boolean;
  void_reason: string;
  /** What the model proposed, for a step a person edited or acted in its place. */
  proposal: { thought: string; action_text: string; action?: Action | null } | null;
  reward: number | null;
  screenshot_url: string;
  width: number;
  height: number;
  url: string;
  human_thought: string;
  done?: boolean;
  created_at: string;
}

export interface EpisodeDetail extends Episode {
  steps: Step[];
}

export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** One point the trainer reported: `loss` at `step` of `total`, in a `phase` (demos, sft, dpo...). */
export interface RunMetric {
  step: number;
  total?: number;
  loss?: number;
  phase?: string;
  [extra: string]: unknown;
}

export interface TrainingRun {
  id: number;
  algorithm: string;
  status: RunStatus;
  /** 0..1 */
  progress: number;
  config: Record<string, unknown>;
  metrics: RunMetric[];
  error: string;
  log_tail: string;
  checkpoint: { id: number; name: string } | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface Deployment {
  id: number;
  checkpoint: { id: number; name: string };
  backend: string;
  active: boolean;
  activated_at: string | null;
  deactivated_at: string | null;
  reason: string;
}

export interface HealthCheck {
  ok: boolean;
  [detail: string]: unknown;
}

export interface Health {
  status: "ok" | "degraded";
  checks: Record<string, HealthCheck>;
}

/** A think-aloud recording (annotation/api.py `clip_output`). */
export interface AudioClip {
  id: number;
  episode: number;
  client_id: string;
  content_type: string;
  /** Session seconds (server epoch) when recording began. */
  started_at: number;
  /** Where the clip's audio time 0 lies on the session clock (chunk 0's start). */
  origin?: number;
  committed_until: number;
  chunks: number;
  transcribed_chunks: number;
  finished: boolean;
}

/** A transcribed word; `start`/`end` are session seconds, `step` the step it was spoken in. */
export interface TranscriptWordRecord {
  word: string;
  start: number;
  end: number;
  probability?: number;
  step: number | null;
  clip?: number;
  username?: string;
}

export interface Transcript {
  words: TranscriptWordRecord[];
  clips: AudioClip[];
}
