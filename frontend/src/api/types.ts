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
  proposal: { thought: string; action_text: string } | null;
  reward: number | null;
  screenshot_url: string;
  width: number;
  height: number;
  url: string;
  human_thought: string;
  created_at: string;
}

export interface EpisodeDetail extends Episode {
  steps: Step[];
}

export interface HealthCheck {
  ok: boolean;
  [detail: string]: unknown;
}

export interface Health {
  status: "ok" | "degraded";
  checks: Record<string, HealthCheck>;
}
