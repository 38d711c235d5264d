/**
 * Think-aloud polished into thoughts (flywheel/polish.py, flywheel/api_polish.py): an episode's progress and its
 * steps' spoken words beside the thought written from them, editing a step's thought, polishing again.
 */
import { apiFetch } from "./client";

/** "" no words (or not polished yet); queued: the worker is on it; edited: a person wrote it. */
export type PolishState = "" | "queued" | "done" | "failed" | "edited";

/** The polish fields the episode's step payload carries besides the Step type's. */
export interface StepPolishFields {
  episode?: number;
  polished_thought?: string;
  polish_state?: PolishState;
  polish_error?: string;
}

export interface StepPolish {
  index: number;
  /** The words said during the step, raw (the step's human_thought). */
  words: string;
  polished_thought: string;
  polish_state: PolishState;
  /** Why the last polish gave no thought, in plain words. */
  polish_error: string;
  polished_at: string | null;
  /** The words changed after this thought was written. */
  stale: boolean;
  /** Whether you may edit it or polish it again (managers, and the annotator who worked on the step). */
  can_edit: boolean;
}

export interface PolishProgress {
  steps_with_words: number;
  done: number;
  edited: number;
  queued: number;
  failed: number;
  not_polished: number;
}

export interface EpisodePolish {
  episode: number;
  progress: PolishProgress;
  /** Whether you may polish the whole episode again (managers). */
  can_request: boolean;
  settings: { backend: "cleanup" | "openai"; enabled: boolean };
  steps: StepPolish[];
}

export const episodePolishGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<EpisodePolish>(`episodes/${episodeId}/polish`, { signal });

/** Polish every step with words again, except those a person edited (queued on the worker). */
export const episodePolishRequest = (episodeId: number) =>
  apiFetch<{ queued: number[]; progress: PolishProgress }>(`episodes/${episodeId}/polish`, { method: "POST" });

export const stepPolishEdit = (episodeId: number, index: number, polishedThought: string) =>
  apiFetch<StepPolish>(`episodes/${episodeId}/steps/${index}/polish`, {
    method: "PATCH",
    body: { polished_thought: polishedThought },
  });

/** Polish one step's words again, replacing an edit; a second request while it is queued changes nothing. */
export const stepPolishRequest = (episodeId: number, index: number) =>
  apiFetch<StepPolish & { queued_now: boolean }>(`episodes/${episodeId}/steps/${index}/polish`, { method: "POST" });
