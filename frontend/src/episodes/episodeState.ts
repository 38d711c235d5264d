/**
 * What the viewer knows about a live episode, and how each server event changes it. A pure
 * reducer, so replays after a reconnect and live events go through the same code.
 */
import type { ServerMessage } from "../api/ws";
import type { Action, Episode, EpisodeDetail, EpisodeStatus, Step } from "../api/types";

export interface Control {
  username: string;
}

/** What `step.proposed` carries: the model's next step before it executes. */
export interface Proposal {
  index: number | null;
  thought: string;
  action: Action | null;
  action_text: string;
}

export interface TranscriptWord {
  word: string;
  start?: number;
  end?: number;
  step_index?: number | null;
}

export interface LiveEpisode {
  episode: Episode | null;
  steps: Step[];
  proposal: Proposal | null;
  control: Control | null;
  words: TranscriptWord[];
  /** The latest `error` message from the server, shown until the next state change. */
  serverError: string | null;
}

export const TERMINAL_STATUSES: EpisodeStatus[] = ["finished", "failed", "interrupted"];

export const emptyLive: LiveEpisode = {
  episode: null,
  steps: [],
  proposal: null,
  control: null,
  words: [],
  serverError: null,
};

/** Insert or replace a step by its index, keeping the list ordered. */
export function upsertStep(steps: Step[], step: Step): Step[] {
  const others = steps.filter((s) => s.index !== step.index);
  return [...others, step].sort((a, b) => a.index - b.index);
}

function controlFrom(data: Record<string, unknown>): Control | null | undefined {
  if ("control" in data) {
    const c = data.control as { username?: unknown } | null;
    return c && typeof c.username === "string" ? { username: c.username } : null;
  }
  if (typeof data.username === "string") return { username: data.username };
  return undefined;
}

function episodeFields(data: Record<string, unknown>): Partial<Episode> {
  const { control: _control, steps: _steps, ...rest } = data;
  return rest as Partial<Episode>;
}

export function fromDetail(detail: EpisodeDetail): LiveEpisode {
  const { steps, ...episode } = detail;
  const control = controlFrom(detail as unknown as Record<string, unknown>);
  return { ...emptyLive, episode, steps: [...steps].sort((a, b) => a.index - b.index), control: control ?? null };
}

export function applyMessage(state: LiveEpisode, message: ServerMessage): LiveEpisode {
  const data = (message.data ?? {}) as Record<string, unknown>;
  switch (message.type) {
    case "episode.state": {
      const control = controlFrom(data);
      return {
        ...state,
        episode: state.episode ? { ...state.episode, ...episodeFields(data) } : (episodeFields(data) as Episode),
        control: control === undefined ? state.control : control,
        serverError: null,
      };
    }
    case "step.proposed":
      return {
        ...state,
        proposal: {
          index: typeof data.index === "number" ? data.index : null,
          thought: String(data.thought ?? ""),
          action: (data.action as Action | null) ?? null,
          action_text: String(data.action_text ?? ""),
        },
      };
    case "step.executed": {
      const step = data as unknown as Step;
      if (typeof step.index !== "number") return state;
      const steps = upsertStep(state.steps, step);
      const episode = state.episode ? { ...state.episode, n_steps: Math.max(state.episode.n_steps, steps.length) } : null;
      return { ...state, steps, episode, proposal: null };
    }
    case "episode.finished":
      return {
        ...state,
        episode: state.episode
          ? { ...state.episode, status: "finished", ...episodeFields(data) }
          : (episodeFields(data) as Episode),
        proposal: null,
      };
    case "control.changed": {
      const control = controlFrom(data);
      return { ...state, control: control === undefined ? null : control };
    }
    case "transcript.words": {
      const words = Array.isArray(data.words) ? (data.words as TranscriptWord[]) : [];
      return { ...state, words: [...state.words, ...words] };
    }
    case "error":
      return { ...state, serverError: String(data.message ?? "The server reported an error.") };
    default:
      return state; // Types a later release adds are ignored, not fatal.
  }
}
