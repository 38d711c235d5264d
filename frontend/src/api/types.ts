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
  /** An authored task's JSON (OSWorld, WebArena or any-URL); null for a shipped task. */
  definition: unknown;
  source: "shipped" | "authored";
}

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
  /** Where a branch branched from: its parent episode and the step it acts on anew. */
  branch_of?: { episode: number; step: number } | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** The one person steering the episode, when someone is. */
  control?: { username: string } | null;
  /** The index of the proposal waiting for a decision. */
  pending_index?: number | null;
  /** A person has taken over acting. */
  human_control?: boolean;
  /** Where a queued episode stands in its lane; null unless it is queued. */
  queue: EpisodeQueue | null;
  /** What the task asks, as the environment gave it for this seed ("" until the environment starts). */
  instruction?: string;
  /** What the person wrote when they finished the episode. */
  comment?: string;
  /** Why the episode waits for a review before it is routed: the person's outcome and the task's check disagree. */
  review_reason?: string;
}

/**
 * A queued episode's place in line. Supervised episodes wait in the people's lane, on workers kept
 * for people; autonomous ones in the machines' lane.
 */
export interface EpisodeQueue {
  lane: "people" | "machines";
  /** Queued episodes of the same lane that were queued before this one. */
  ahead: number;
  /** Episodes of the same lane running now. */
  running: number;
}

/** An action as the parser stores it: `click(x=120, y=48)` is `{name: "click", args: {x: 120, y: 48}}`. */
export interface Action {
  name: string;
  args: Record<string, unknown>;
}

export type Actor = "model" | "human" | "edited";

/** A proposal of the model that a person rejected before its step ran (the model was asked again). */
export interface Rejection {
  /** 1 for the step's first proposal, 2 for the one after the first reject... */
  attempt: number;
  thought: string;
  action: Action | null;
  action_text: string;
  void_reason: string;
  /** Why, in the person's words (the model read it). */
  reason: string;
  /** Its action had already been rejected at this step: the model repeated itself. */
  repeated: boolean;
  rejected_by: string | null;
  created_at: string | null;
}

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
  /** What the person's turn changed of the proposal: "same" when a takeover did what the model proposed. */
  correction?: "" | "action" | "thought" | "same";
  /** What the env said of the step (an error, a shell command's exit_code and output...). */
  info?: Record<string, unknown>;
  /** The model's proposals for this step that a person rejected first, oldest first. */
  rejections?: Rejection[];
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
  /** What a person should know about how training went (cut by its time budget, capped epochs), in plain words. */
  warnings: string[];
  error: string;
  log_tail: string;
  checkpoint: { id: number; name: string } | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

export interface Deployment {
  id: number;
  /** action_format: how the checkpoint writes its answers (agent/formats); reads_images: it is sent screenshots. */
  checkpoint: { id: number; name: string; action_format?: string; reads_images?: boolean };
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

// --- flywheel cycles (frontend/src/cycles; flywheel/api_cycles.py) ------------------------

export type CycleState =
  | "gate"
  | "snapshot"
  | "train"
  | "evaluate"
  | "decide"
  | "deployed"
  | "rejected"
  | "skipped"
  | "failed";

export type TrainAlgorithm = "sft" | "dpo" | "rl";

/** One stage of a project's training recipe; stages run in order, each from the last one's output. */
export interface RecipeStage {
  algorithm: TrainAlgorithm;
  max_steps: number;
  max_seconds?: number;
  /** Passes over the stage's rows at most, whatever max_steps says (0: no cap); not for rl stages. */
  max_epochs?: number;
  lr?: number;
  lora?: string;
}

export interface TaskEvalSummary {
  episodes: number;
  success_rate: number;
  mean_reward: number;
  mean_steps: number;
  void_rate: number;
}

export interface CycleEvaluation {
  id: number;
  checkpoint: { id: number; name: string };
  /** candidate: the checkpoint this cycle trained; deployed: what served when it was measured. */
  role: "candidate" | "deployed" | "";
  success_rate: number | null;
  mean_reward: number | null;
  episodes: number;
  /** Seed range by task, e.g. {"click-test": "100000-100009"}. */
  seeds: Record<string, string>;
  per_task: Record<string, TaskEvalSummary>;
  eval_seconds: number | null;
  created_at: string;
  /** Measured in an earlier cycle on exactly these seeds (greedy decoding gives the same episodes), not rolled out again. */
  reused_from?: { cycle: number; evaluation: number; eval_seconds: number | null } | null;
}

export interface CycleDecision {
  text: string;
  promote: boolean;
  margin: number;
  gain?: number;
  candidate: { checkpoint: string; success_rate: number | null; episodes: number };
  deployed: { checkpoint: string; success_rate: number | null; episodes: number } | null;
  by?: string;
}

export interface CycleGate {
  buckets: Record<string, { rows: number; new_rows: number }>;
  new_rows: number;
  min_new_rows: number;
}

export interface CycleTiming {
  started: string;
  finished?: string;
  seconds?: number;
}

export interface Cycle {
  id: number;
  project: number;
  iteration: number;
  state: CycleState;
  trigger: string;
  triggered_by: { id: number; username: string } | null;
  config: Partial<CycleSettings>;
  decision: string;
  decision_data: { gate?: CycleGate; decision?: CycleDecision; awaiting_approval?: boolean };
  awaiting_approval: boolean;
  error: string;
  log_tail: string;
  timings: Partial<Record<CycleState, CycleTiming>>;
  /** Of the long state now running (snapshot, evaluate): done of total, and what. */
  progress: { done?: number; total?: number; label?: string };
  candidate: { id: number; name: string } | null;
  baseline: { id: number; name: string } | null;
  deployment: number | null;
  snapshots: { id: number; kind: string; rows: number; status: string; sha256: string }[];
  run: TrainingRun | null;
  evaluations: CycleEvaluation[];
  started_at: string;
  updated_at: string;
  finished_at: string | null;
}

export interface CycleSettings {
  min_new_rows: number;
  recipe: RecipeStage[];
  eval_tasks: number[];
  eval_seeds: number;
  eval_max_steps: number;
  margin: number;
  auto_deploy: boolean;
  backend: "local" | "openai";
  export: "lora" | "full";
  base_checkpoint: number | null;
  /** What an SFT stage trains on besides the new rows, and what its validation loss reads (flywheel/replay.py). */
  replay_ratio: number;
  replay_max_rows: number;
  correction_weight: number;
  val_fraction: number;
  val_min_rows: number;
  val_from: "corrected" | "new";
  patience: number;
  /** 0: no schedule (manual runs only). */
  cadence_minutes: number | null;
  schedule: string;
  last_scheduled_at: string | null;
  gate: CycleGate;
  eval_plan: { env: string; seeds: string; max_steps: number; tasks: string[] }[];
  eval_plan_error: string;
  eval_task_choices: { id: number; task_name: string; seed_start: number; seed_end: number }[];
}

export type CycleSettingsInput = Partial<
  Pick<
    CycleSettings,
    | "min_new_rows"
    | "recipe"
    | "eval_tasks"
    | "eval_seeds"
    | "eval_max_steps"
    | "margin"
    | "auto_deploy"
    | "backend"
    | "export"
    | "base_checkpoint"
    | "replay_ratio"
    | "replay_max_rows"
    | "correction_weight"
    | "val_fraction"
    | "val_min_rows"
    | "val_from"
    | "patience"
  > & { cadence_minutes: number }
>;
