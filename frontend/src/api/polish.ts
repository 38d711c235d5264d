/**
 * Think-aloud polished into thoughts (flywheel/polish.py, flywheel/api_polish.py): an episode's progress and its
 * steps' spoken words beside the thought written from them, editing a step's thought, polishing again.
 */
import { apiFetch } from "./client";
import type { Step } from "./episodes";
import type { Schemas } from "./types";

/** "" no words (or not polished yet); queued: the worker is on it; edited: a person wrote it. */
export type PolishState = Schemas["StepPolishOutput"]["polish_state"];
/** The polish fields an episode's step payload carries. */
export type StepPolishFields = Pick<Step, "episode" | "polished_thought" | "polish_state" | "polish_error">;
export type StepPolish = Schemas["StepPolishOutput"];
export type PolishProgress = Schemas["PolishProgressOutput"];
export type EpisodePolish = Schemas["EpisodePolishOutput"];

export const polishKeys = {
  episode: (episodeId: number) => ["episode", episodeId, "polish"] as const,
};

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
