/**
 * What the live session page knows about an episode, and how each server message changes it.
 * A pure reducer, so replays after a reconnect and live events go through the same code, and
 * the page's rules (who may press what) can be tested without a browser.
 */
import type { ServerMessage } from "../api/ws";
import type { Action, Episode, EpisodeDetail, EpisodeStatus, Rejection, Step } from "../api/episodes";
import type { Role } from "../api/projects";

export interface Control {
  username: string;
}

/** What `step.proposed` carries: the model's next step, waiting for the controller's decision. */
export interface Proposal {
  index: number | null;
  thought: string;
  action: Action | null;
  action_text: string;
  raw: string;
  /** Set when the model's output did not parse (a void turn): approve is impossible then. */
  void_reason: string;
  width: number;
  height: number;
  url: string;
  /** "call_user": the model asks the person a question and the episode waits. "unsure": its confidence is under
   * the project's floor, so an autonomous episode waits for a person to decide this step. */
  reason: "" | "call_user" | "unsure";
  /** How sure the model was of this action (0-1, from its logprobs); null when its server gave none. */
  confidence: number | null;
  screenshot_url: string;
  /** Which proposal of this step it is: 2 and more come after a person's rejects. */
  attempt: number;
  /** The proposals of this step rejected so far, oldest first. */
  rejected: Rejection[];
  /** Its action repeats one already rejected here (the model was asked again and still said it). */
  repeated: boolean;
}

export interface TranscriptWord {
  word: string;
  start?: number;
  end?: number;
  /** The step the server attached it to. */
  step?: number | null;
  clip?: number;
}

/** A provisional reading of speech still going on (`transcript.interim`): shown, never stored. */
export interface InterimWords {
  clip: number;
  username: string;
  words: { word: string; start: number; end: number }[];
}

/**
 * A spoken command the server recognised (`voice.command`, annotation/audio_commands.py): the page shows it for a
 * moment, to be cancelled, and then sends it as its key would.
 */
export interface VoiceCommandHeard {
  seq: number;
  type: "approve" | "reject" | "takeover" | "handback" | "pause" | "resume" | "finish";
  reason: string;
  outcome: string;
  username: string;
  /** What was said. */
  words: string;
  /** When it was said: session seconds. */
  end: number;
}

const VOICE_TYPES = ["approve", "reject", "takeover", "handback", "pause", "resume", "finish"];
const KEPT_VOICE = 10;
const KEPT_ACKS = 50;

/** A command sent and not yet answered by an `ack` or an `error`. */
export interface PendingCommand {
  id: string;
  type: string;
}

export interface Notice {
  key: number;
  title: string;
  message: string;
}

export interface LiveEpisode {
  episode: Episode | null;
  steps: Step[];
  proposal: Proposal | null;
  control: Control | null;
  /** A person has taken over acting; the model waits. */
  humanControl: boolean;
  words: TranscriptWord[];
  /** Per clip, the newest provisional words not yet replaced by committed ones. */
  interim: Record<number, InterimWords>;
  /** Who this connection is, from `hello`. */
  me: { username: string; role: Role } | null;
  /** Who is connected now, from `presence`. */
  watchers: string[];
  pending: PendingCommand[];
  /** The ids of the latest commands the server acknowledged (an `error` settles a command without it). */
  acked: string[];
  /** The latest spoken commands heard, oldest first. */
  voice: VoiceCommandHeard[];
  /** Errors to show until dismissed: refusals of our frames and of anyone's stored commands. */
  notices: Notice[];
  nextNoticeKey: number;
}

export const TERMINAL_STATUSES: EpisodeStatus[] = ["finished", "failed", "interrupted"];
export const MAX_NOTICES = 5;

export const emptyLive: LiveEpisode = {
  episode: null,
  steps: [],
  proposal: null,
  control: null,
  humanControl: false,
  words: [],
  interim: {},
  me: null,
  watchers: [],
  pending: [],
  acked: [],
  voice: [],
  notices: [],
  nextNoticeKey: 1,
};

export function isTerminal(status: EpisodeStatus | undefined): boolean {
  return status !== undefined && TERMINAL_STATUSES.includes(status);
}

/** Insert or replace a step by its index, keeping the list ordered. */
export function upsertStep(steps: Step[], step: Step): Step[] {
  const others = steps.filter((s) => s.index !== step.index);
  return [...others, step].sort((a, b) => a.index - b.index);
}

function controlFrom(data: Record<string, unknown>): Control | null | undefined {
  if (!("control" in data)) return undefined;
  const c = data.control as { username?: unknown } | null;
  return c && typeof c.username === "string" ? { username: c.username } : null;
}

function episodeFields(data: Record<string, unknown>): Partial<Episode> {
  const { control: _control, steps: _steps, ...rest } = data;
  return rest as Partial<Episode>;
}

function proposalFrom(data: Record<string, unknown>): Proposal {
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    index: typeof data.index === "number" ? data.index : null,
    thought: String(data.thought ?? ""),
    action: (data.action as Action | null) ?? null,
    action_text: String(data.action_text ?? ""),
    raw: String(data.raw ?? ""),
    void_reason: String(data.void_reason ?? ""),
    width: num(data.width),
    height: num(data.height),
    url: String(data.url ?? ""),
    reason: data.reason === "call_user" || data.reason === "unsure" ? data.reason : "",
    confidence: typeof data.confidence === "number" && Number.isFinite(data.confidence) ? data.confidence : null,
    screenshot_url: String(data.screenshot_url ?? ""),
    attempt: typeof data.attempt === "number" && data.attempt >= 1 ? data.attempt : 1,
    rejected: Array.isArray(data.rejected) ? (data.rejected as Rejection[]) : [],
    repeated: data.repeated === true,
  };
}

function withNotice(state: LiveEpisode, title: string, message: string): LiveEpisode {
  const notice = { key: state.nextNoticeKey, title, message };
  return { ...state, notices: [...state.notices, notice].slice(-MAX_NOTICES), nextNoticeKey: state.nextNoticeKey + 1 };
}

function settle(state: LiveEpisode, id: unknown): LiveEpisode {
  if (typeof id !== "string" || !state.pending.some((p) => p.id === id)) return state;
  return { ...state, pending: state.pending.filter((p) => p.id !== id) };
}

export function fromDetail(detail: EpisodeDetail): LiveEpisode {
  const { steps, ...episode } = detail;
  const control = controlFrom(detail as unknown as Record<string, unknown>);
  return {
    ...emptyLive,
    episode,
    steps: [...steps].sort((a, b) => a.index - b.index),
    control: control ?? null,
    humanControl: Boolean(detail.human_control),
  };
}

/** The page sent a command: it is pending until its `ack` or `error` arrives. */
export function commandSent(state: LiveEpisode, command: PendingCommand): LiveEpisode {
  return { ...state, pending: [...state.pending, command] };
}

export function noticeDismissed(state: LiveEpisode, key: number): LiveEpisode {
  return { ...state, notices: state.notices.filter((n) => n.key !== key) };
}

/** Committed words of a clip replace its provisional ones up to where they end. */
function withoutCommitted(interim: LiveEpisode["interim"], clip: unknown, words: TranscriptWord[]): LiveEpisode["interim"] {
  if (typeof clip !== "number" || !interim[clip]) return interim;
  const until = Math.max(...words.map((w) => (typeof w.end === "number" ? w.end : -Infinity)));
  const left = interim[clip].words.filter((w) => w.start >= until);
  const next = { ...interim };
  if (left.length) next[clip] = { ...interim[clip], words: left };
  else delete next[clip];
  return next;
}

export function applyMessage(state: LiveEpisode, message: ServerMessage): LiveEpisode {
  const data = (message.data ?? {}) as Record<string, unknown>;
  switch (message.type) {
    case "hello": {
      const username = typeof data.username === "string" ? data.username : "";
      const role = (typeof data.role === "string" ? data.role : "annotator") as Role;
      return { ...state, me: username ? { username, role } : state.me };
    }
    case "episode.state": {
      const control = controlFrom(data);
      const closed = "pending_index" in data && data.pending_index === null;
      return {
        ...state,
        episode: state.episode ? { ...state.episode, ...episodeFields(data) } : (episodeFields(data) as Episode),
        control: control === undefined ? state.control : control,
        humanControl: typeof data.human_control === "boolean" ? data.human_control : state.humanControl,
        proposal: closed ? null : state.proposal,
      };
    }
    case "step.proposed":
      return { ...state, proposal: proposalFrom(data) };
    case "step.executed": {
      const step = data as unknown as Step;
      if (typeof step.index !== "number") return state;
      const steps = upsertStep(state.steps, step);
      const episode = state.episode ? { ...state.episode, n_steps: Math.max(state.episode.n_steps, steps.length) } : null;
      // A proposal for a later step (already announced) stays open.
      const proposal = state.proposal && (state.proposal.index ?? -1) > step.index ? state.proposal : null;
      return { ...state, steps, episode, proposal };
    }
    case "episode.finished":
      return {
        ...state,
        episode: state.episode
          ? { ...state.episode, status: "finished", ...episodeFields(data) }
          : (episodeFields(data) as Episode),
        proposal: null,
        humanControl: false,
        pending: [],
      };
    case "control.changed": {
      const control = controlFrom(data);
      return {
        ...state,
        control: control === undefined ? null : control,
        humanControl: typeof data.human_control === "boolean" ? data.human_control : state.humanControl,
      };
    }
    case "transcript.words": {
      const words = Array.isArray(data.words) ? (data.words as TranscriptWord[]) : [];
      return { ...state, words: [...state.words, ...words], interim: withoutCommitted(state.interim, data.clip, words) };
    }
    case "transcript.interim": {
      if (typeof data.clip !== "number" || !Array.isArray(data.words)) return state;
      const words = (data.words as InterimWords["words"]).filter(
        (w) => typeof w.word === "string" && typeof w.start === "number" && typeof w.end === "number",
      );
      const entry = { clip: data.clip, username: String(data.username ?? ""), words };
      return { ...state, interim: { ...state.interim, [data.clip]: entry } };
    }
    case "ack": {
      const acked = typeof message.id === "string" ? [...state.acked, message.id].slice(-KEPT_ACKS) : state.acked;
      return { ...settle(state, message.id), acked };
    }
    case "voice.command": {
      if (typeof message.seq !== "number" || !VOICE_TYPES.includes(String(data.type))) return state;
      if (state.voice.some((v) => v.seq === message.seq)) return state;
      const heard: VoiceCommandHeard = {
        seq: message.seq,
        type: data.type as VoiceCommandHeard["type"],
        reason: String(data.reason ?? ""),
        outcome: String(data.outcome ?? ""),
        username: String(data.username ?? ""),
        words: String(data.words ?? ""),
        end: typeof data.end === "number" ? data.end : 0,
      };
      return { ...state, voice: [...state.voice, heard].slice(-KEPT_VOICE) };
    }
    case "presence": {
      const watchers = Array.isArray(data.watchers) ? data.watchers.map(String) : [];
      return { ...state, watchers };
    }
    case "error": {
      const text = String(data.message ?? "The server reported an error.");
      if (typeof message.seq === "number") {
        // A stored command the worker refused; everyone sees it, its sender most of all.
        const who = typeof data.username === "string" && data.username ? data.username : "someone";
        const mine = state.me?.username === who;
        return withNotice(settle(state, data.command), mine ? "Your command was refused" : `${who}'s command was refused`, text);
      }
      return withNotice(settle(state, message.id), "The server refused that", text);
    }
    default:
      return state; // Types a later release adds are ignored, not fatal.
  }
}
