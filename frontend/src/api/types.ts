/**
 * The records the Loupe API answers, by the names the app uses. Every shape is generated: `schema.d.ts` is what
 * openapi-typescript makes of the server's OpenAPI schema (`python manage.py api_types` writes it;
 * tests/webapp/test_openapi_types.py fails when it is stale, and checks real answers against the schema). Change a
 * serializer on the server, regenerate, and `tsc` shows what the pages must follow.
 */
import type { components } from "./schema";

/** The schema's named records (`components.schemas`). */
export type Schemas = components["schemas"];

export type Role = Schemas["RoleEnum"];
export type User = Schemas["UserOutput"];
/** A user as other records name one. */
export type UserRef = Schemas["UserRef"];
export type CheckpointRef = Schemas["CheckpointRef"];

/** A page of a list: its items and the URL of the next page (null on the last). */
export interface Page<T> {
  results: T[];
  next: string | null;
}

export type Project = Schemas["ProjectOutput"];
export type Member = Schemas["MemberOutput"];

export type Split = Schemas["SplitEnum"];
export type TaskSpec = Schemas["TaskOutput"];

export type EpisodeMode = Schemas["ModeEnum"];
export type EpisodeStatus = Schemas["EpisodeStatusEnum"];
export type EpisodeOutcome = Schemas["EpisodeOutput"]["outcome"];

export const EPISODE_STATUSES: EpisodeStatus[] = [
  "queued",
  "running",
  "paused",
  "finished",
  "failed",
  "interrupted",
];
export const EPISODE_MODES: EpisodeMode[] = ["autonomous", "supervised"];

export type Episode = Schemas["EpisodeOutput"];
/** A queued episode's place in its lane (people's or machines'). */
export type EpisodeQueue = Schemas["EpisodeQueueOutput"];
/** Where a branch branched from: its parent episode and the step it acts on anew. */
export type BranchOf = Schemas["BranchOfOutput"];
export type ReviewStatus = Schemas["ReviewStatusEnum"];
export type ReviewSummary = Schemas["ReviewSummaryOutput"];

/** An action as the parser stores it: `click(x=120, y=48)` is `{name: "click", args: {x: 120, y: 48}}`. */
export type Action = Schemas["ActionOutput"];
export type Actor = Schemas["ActorEnum"];
/** The model's turn that a person overrode, as stored. */
export type StoredProposal = Schemas["TurnOutput"];
/** A proposal of the model that a person rejected before its step ran (the model was asked again). */
export type Rejection = Schemas["RejectionOutput"];
export type Step = Schemas["StepOutput"];
export type EpisodeDetail = Schemas["EpisodeDetailOutput"];

export type RunStatus = Schemas["RunStatusEnum"];
/** One progress line of the trainer: `loss` at `step` of `total`, in a `phase` (demos, sft, dpo...). */
export type RunMetric = Schemas["RunMetricOutput"];
export type TrainingRun = Schemas["RunOutput"];
export type Deployment = Schemas["DeploymentOutput"];

export type HealthCheck = Schemas["HealthCheckOutput"];
export type Health = Schemas["HealthOutput"];

/** A think-aloud recording. */
export type AudioClip = Schemas["ClipOutput"];
/**
 * A transcribed word, from the transcript API or the live socket (`transcript.words`, which leaves out the
 * probability, clip and speaker): `start`/`end` are session seconds, `step` the step it was spoken in.
 */
export type TranscriptWordRecord = Pick<Schemas["TranscriptWordOutput"], "word" | "start" | "end" | "step"> &
  Partial<Pick<Schemas["TranscriptWordOutput"], "probability" | "clip" | "username">>;
export type Transcript = Schemas["TranscriptOutput"];

// --- flywheel cycles (frontend/src/cycles) ------------------------------------------------------------------------

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
