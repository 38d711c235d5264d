/**
 * The think-aloud endpoints (annotation/api.py): create a clip, PUT its chunks, finish it, read
 * the episode's transcript, play a clip back. Every call goes through the one API client; a chunk
 * is raw bytes, sent as the client's `rawBody` with the same CSRF header and the same error shape.
 */
import { API_ROOT, ApiError, apiFetch, NETWORK_ERROR_DETAIL } from "./client";
import type { Schemas } from "./types";

/** A think-aloud recording. */
export type AudioClip = Schemas["ClipOutput"];
/** A transcribed word as the transcript API gives it: session-clock times and the step it was aligned to. */
export type TranscriptWord = Schemas["TranscriptWordOutput"];
/**
 * A transcribed word, from the transcript API or the live socket (`transcript.words`, which leaves out the
 * probability, clip and speaker): `start`/`end` are session seconds, `step` the step it was spoken in.
 */
export type TranscriptWordRecord = Pick<TranscriptWord, "word" | "start" | "end" | "step"> &
  Partial<Pick<TranscriptWord, "probability" | "clip" | "username">>;
/** An episode's stored transcript and its clips (`GET episodes/<id>/transcript`). */
export type Transcript = Schemas["TranscriptOutput"];

export const audioKeys = {
  /** The stored transcript, as the live session reads it (asked again on every reconnect). */
  transcript: (episodeId: number) => ["episode", episodeId, "transcript"] as const,
};

/** What the server needs to create (or find again) a clip: creation is idempotent by `client_id`. */
export interface ClipMeta {
  episodeId: number;
  clientId: string;
  contentType: string;
  /** Session seconds (server epoch) when recording began. */
  startedAt: number;
  /** Utterances that are commands are sent as commands, not kept as thoughts (annotation/audio_commands.py). */
  voiceCommands?: boolean;
}

/** The server's answer to a chunk PUT. */
export type ChunkStored = Schemas["ChunkStored"];

export const clipCreate = (clip: ClipMeta, signal?: AbortSignal) =>
  apiFetch<AudioClip>(`episodes/${clip.episodeId}/audio/`, {
    method: "POST",
    body: {
      client_id: clip.clientId,
      content_type: clip.contentType,
      started_at: clip.startedAt,
      voice_commands: clip.voiceCommands ?? false,
    },
    signal,
  });

export const clipFinish = (clipId: number, signal?: AbortSignal) =>
  apiFetch<AudioClip>(`audio/${clipId}/finish`, { method: "POST", signal });

export const transcriptGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<Transcript>(`episodes/${episodeId}/transcript`, { signal });

/** Where a clip's recorded audio is played from (an `<audio src>`). */
export const clipFileUrl = (clipId: number) => `${API_ROOT}/audio/${clipId}/file`;

/**
 * PUT one chunk. `start` is the chunk's start on the session clock (X-Chunk-Start). The server
 * answers 201 (stored) or 200 (the same bytes were stored already), so a retry is always safe.
 */
export async function chunkPut(
  clipId: number,
  index: number,
  data: Blob,
  contentType: string,
  start: number,
  signal?: AbortSignal,
): Promise<ChunkStored> {
  try {
    return await apiFetch<ChunkStored>(`audio/${clipId}/chunks/${index}`, {
      method: "PUT",
      rawBody: data,
      headers: { "Content-Type": contentType, "X-Chunk-Start": start.toFixed(3) },
      signal,
    });
  } catch (error) {
    // A PUT cut short (the upload queue's timeout aborts it) got no answer: whether the server
    // stored it is unknown, which a retry settles. It reads as any other lost answer.
    if (error instanceof DOMException && error.name === "AbortError") {
      throw new ApiError({ kind: "network", status: 0, detail: NETWORK_ERROR_DETAIL });
    }
    throw error;
  }
}
