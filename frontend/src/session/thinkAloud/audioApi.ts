/**
 * The think-aloud endpoints (annotation/api.py): create a clip, PUT its chunks, finish it, read
 * the episode's transcript. JSON calls go through the one API client; a chunk is raw bytes, so
 * its PUT is a plain fetch with the same CSRF header and the same error shape.
 */
import { API_ROOT, ApiError, apiFetch, errorFromResponse, getCookie, NETWORK_ERROR_DETAIL } from "../../api/client";
import type { AudioClip, Transcript } from "../../api/types";

/** What the server needs to create (or find again) a clip: creation is idempotent by `client_id`. */
export interface ClipMeta {
  episodeId: number;
  clientId: string;
  contentType: string;
  /** Session seconds (server epoch) when recording began. */
  startedAt: number;
}

export const clipCreate = (clip: ClipMeta, signal?: AbortSignal) =>
  apiFetch<AudioClip>(`episodes/${clip.episodeId}/audio/`, {
    method: "POST",
    body: { client_id: clip.clientId, content_type: clip.contentType, started_at: clip.startedAt },
    signal,
  });

export const clipFinish = (clipId: number, signal?: AbortSignal) =>
  apiFetch<AudioClip>(`audio/${clipId}/finish`, { method: "POST", signal });

export const transcriptGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<Transcript>(`episodes/${episodeId}/transcript`, { signal });

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
): Promise<{ clip: number; index: number; size: number; duplicate: boolean }> {
  const headers: Record<string, string> = {
    Accept: "application/json",
    "Content-Type": contentType,
    "X-Chunk-Start": start.toFixed(3),
  };
  const token = getCookie("csrftoken");
  if (token) headers["X-CSRFToken"] = token;
  let response: Response;
  try {
    response = await fetch(`${API_ROOT}/audio/${clipId}/chunks/${index}`, {
      method: "PUT",
      headers,
      credentials: "same-origin",
      body: data,
      signal,
    });
  } catch {
    // No answer (offline, timed out): whether the server stored it is unknown, which a retry settles.
    throw new ApiError({ kind: "network", status: 0, detail: NETWORK_ERROR_DETAIL });
  }
  if (!response.ok) throw await errorFromResponse(response);
  return response.json();
}
