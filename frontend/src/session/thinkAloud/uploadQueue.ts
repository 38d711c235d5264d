/**
 * The think-aloud upload queue: every chunk the recorder cuts goes here first and leaves only
 * once the server has stored it, so a network drop loses no audio.
 *
 * - One upload at a time, oldest first: a clip's chunk 0 (which carries the WebM header every
 *   later chunk continues) is stored before chunk 1 is sent, and a clip's finish follows its
 *   last chunk.
 * - Every call is idempotent on the server (a clip is found again by its client id, a chunk PUT
 *   of the same bytes answers 200, finishing twice is harmless), so after an unknown outcome —
 *   a timeout, a dropped connection — the same request is simply sent again.
 * - A failure that may pass (no answer, 5xx, 408, 429, logged out) is retried with exponential
 *   backoff; while the browser is offline the queue waits for the `online` event instead. A
 *   refusal that cannot pass (the server's 400/413/415/409/403/404) drops the chunk and says why.
 * - Items are kept in IndexedDB where available, so a reload does not lose them.
 */
import { ApiError } from "../../api/client";
import { type BackoffOptions, backoffDelay } from "../../api/ws";
import { chunkPut, type ClipMeta, clipCreate, clipFinish } from "../../api/audio";
import { IndexedDbUploadStore, MemoryUploadStore, type UploadItem, type UploadStore } from "./uploadStore";

export type QueueState = "idle" | "uploading" | "retrying" | "offline";

export interface FailedUpload {
  clientId: string;
  /** The chunk refused (-1: the finish call), and how many later chunks of its clip went with it. */
  index: number;
  lost: number;
  /** Why, in plain words; `detail` is the server's own message (shown on hover). */
  message: string;
  detail: string;
}

export interface QueueStatus {
  state: QueueState;
  /** Chunks recorded and not yet stored by the server. */
  waiting: number;
  /** Clips whose finish call is still waiting. */
  finishing: number;
  /** Epoch ms of the next attempt while `retrying`. */
  retryAt: number | null;
  /** Why the last attempt failed, as the server or the network put it; empty after a success. */
  lastError: string;
  /** Chunks stored since the page loaded. */
  uploaded: number;
  failed: FailedUpload[];
  /** Whether waiting chunks survive a reload (IndexedDB). */
  persistent: boolean;
}

export const UPLOAD_BACKOFF: BackoffOptions = { initialMs: 1000, maxMs: 30_000, jitter: 0.2 };
const REQUEST_TIMEOUT_MS = 30_000;
const MAX_FAILED_SHOWN = 5;

export interface AudioCalls {
  clipCreate: (clip: ClipMeta, signal?: AbortSignal) => Promise<{ id: number }>;
  chunkPut: (clipId: number, index: number, data: Blob, contentType: string, start: number, signal?: AbortSignal) => Promise<unknown>;
  clipFinish: (clipId: number, signal?: AbortSignal) => Promise<unknown>;
}

export interface Connectivity {
  isOnline: () => boolean;
  /** Call `onOnline` when the browser says it is back online; returns an unsubscribe. */
  onOnline: (onOnline: () => void) => () => void;
}

export const browserConnectivity: Connectivity = {
  isOnline: () => typeof navigator === "undefined" || navigator.onLine !== false,
  onOnline: (onOnline) => {
    window.addEventListener("online", onOnline);
    return () => window.removeEventListener("online", onOnline);
  },
};

export interface UploadQueueOptions {
  owner: string;
  /** A promise for the store, so the queue can start at once while IndexedDB opens. */
  store?: UploadStore | Promise<UploadStore | null>;
  calls?: AudioCalls;
  connectivity?: Connectivity;
  backoff?: BackoffOptions;
  random?: () => number;
  requestTimeoutMs?: number;
}

/** What a refusal that will not pass means for the person, in their words (the server's own, more technical
 * message stays in `detail`). */
const REFUSED: Record<number, string> = {
  400: "the server could not read this piece of the recording.",
  403: "you may not add audio to this recording any more (you lost access to the project, or it is someone else's).",
  404: "the episode or its recording is gone, or you no longer have access to its project.",
  409: "the recording was already closed, or the server holds other audio at this place in it.",
  413: "this piece of the recording is larger than the server accepts.",
  415: "this browser records audio in a format the server does not take; use Chrome, Edge or Firefox.",
};

/** Whether a failed attempt may succeed if repeated, and what to tell the person. */
export function classifyFailure(error: unknown): { retry: boolean; message: string; detail: string } {
  if (!(error instanceof ApiError)) return { retry: true, message: "No answer from the server.", detail: "" };
  if (error.isNetwork) return { retry: true, message: "Could not reach the server.", detail: "" };
  if (error.status === 401)
    return {
      retry: true,
      message: "You are logged out; log in again (in another tab) and the audio uploads.",
      detail: error.detail,
    };
  if (error.status >= 500 || error.status === 408 || error.status === 429)
    return { retry: true, message: "The server is busy or failing.", detail: error.detail };
  const message = REFUSED[error.status] ?? "the server refused this piece of the recording.";
  return { retry: false, message: message.charAt(0).toUpperCase() + message.slice(1), detail: error.detail };
}

export function chunkCount(n: number): string {
  return `${n} chunk${n === 1 ? "" : "s"}`;
}

/** One line for the microphone control: "3 chunks waiting, retrying in 4 s". */
export function uploadStatusText(status: QueueStatus, nowMs: number): string {
  const { waiting, finishing } = status;
  if (waiting === 0 && finishing === 0) {
    return status.uploaded > 0 ? `All audio uploaded (${chunkCount(status.uploaded)}).` : "";
  }
  const what = waiting > 0 ? `${chunkCount(waiting)} waiting` : "Finishing the recording";
  if (status.state === "offline") return `Offline: ${what}; they upload when the connection returns.`;
  if (status.state === "retrying" && status.retryAt !== null) {
    const seconds = Math.max(1, Math.ceil((status.retryAt - nowMs) / 1000));
    return `${what}, retrying in ${seconds} s${status.lastError ? ` (${status.lastError})` : ""}`;
  }
  return waiting > 0 ? `Uploading: ${what}…` : `${what}…`;
}

export class UploadQueue {
  readonly owner: string;
  private readonly calls: AudioCalls;
  private readonly connectivity: Connectivity;
  private readonly backoff: BackoffOptions;
  private readonly random: () => number;
  private readonly timeoutMs: number;
  private store: UploadStore = new MemoryUploadStore();
  private readonly ready: Promise<void>;
  private readonly items = new Map<string, UploadItem>();
  private readonly clipIds = new Map<string, number>();
  private readonly listeners = new Set<() => void>();
  private nextSeq = 1;
  private attempt = 0;
  private running = false;
  private stopped = false;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private readonly unsubscribeOnline: () => void;
  private statusValue: QueueStatus;

  constructor(options: UploadQueueOptions) {
    this.owner = options.owner;
    this.calls = options.calls ?? { clipCreate, chunkPut, clipFinish };
    this.connectivity = options.connectivity ?? browserConnectivity;
    this.backoff = options.backoff ?? UPLOAD_BACKOFF;
    this.random = options.random ?? Math.random;
    this.timeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.statusValue = {
      state: "idle", waiting: 0, finishing: 0, retryAt: null, lastError: "", uploaded: 0, failed: [], persistent: false,
    };
    this.unsubscribeOnline = this.connectivity.onOnline(() => this.retryNow());
    this.ready = this.restore(options.store);
    void this.ready.then(() => this.pump());
  }

  get status(): QueueStatus {
    return this.statusValue;
  }

  /** Settles once stored items from an earlier page are back in the queue. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Queue one recorded chunk and start uploading it if nothing is ahead of it. */
  addChunk(clip: ClipMeta, index: number, start: number, data: Blob): void {
    this.add({ id: `${clip.clientId}:${index}`, seq: 0, owner: this.owner, clip, kind: "chunk", index, start, data });
  }

  /** Queue the finish of a clip (after its last chunk): the server transcribes the rest at once. */
  addFinish(clip: ClipMeta): void {
    this.add({ id: `${clip.clientId}:finish`, seq: 0, owner: this.owner, clip, kind: "finish", index: -1, start: clip.startedAt });
  }

  /** Try now instead of waiting out the backoff (the `online` event, or a person's click). */
  retryNow(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.attempt = 0;
    void this.pump();
  }

  /** Stop for good (tests; a logout). Waiting items stay in the store for next time. */
  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.unsubscribeOnline();
  }

  private add(item: UploadItem): void {
    if (this.items.has(item.id)) return;
    item.seq = this.nextSeq++;
    this.items.set(item.id, item);
    this.store.put(item).catch(() => this.fallBackToMemory());
    this.update({});
    void this.pump();
  }

  private async restore(storeOrPromise: UploadQueueOptions["store"]): Promise<void> {
    let store: UploadStore | null;
    try {
      store = (await (storeOrPromise ?? IndexedDbUploadStore.open())) ?? null;
    } catch {
      store = null;
    }
    if (!store) return;
    let saved: UploadItem[] = [];
    try {
      saved = await store.load(this.owner);
    } catch {
      return; // keep the memory store: IndexedDB is refusing us
    }
    this.store = store;
    // Items recorded while the store opened were numbered first but come after the saved ones.
    const recent = [...this.items.values()];
    this.items.clear();
    this.nextSeq = 1;
    for (const item of [...saved.sort((a, b) => a.seq - b.seq), ...recent]) {
      if (this.items.has(item.id)) continue;
      item.seq = this.nextSeq++;
      this.items.set(item.id, item);
    }
    for (const item of recent) store.put(item).catch(() => this.fallBackToMemory());
    this.update({ persistent: store.persistent });
  }

  private fallBackToMemory(): void {
    if (!this.store.persistent) return;
    this.store = new MemoryUploadStore();
    this.update({ persistent: false });
  }

  private head(): UploadItem | undefined {
    let first: UploadItem | undefined;
    for (const item of this.items.values()) if (!first || item.seq < first.seq) first = item;
    return first;
  }

  private update(changes: Partial<QueueStatus>): void {
    let waiting = 0;
    let finishing = 0;
    for (const item of this.items.values()) {
      if (item.kind === "chunk") waiting += 1;
      else finishing += 1;
    }
    const state = changes.state ?? (waiting + finishing === 0 ? "idle" : this.statusValue.state);
    this.statusValue = { ...this.statusValue, ...changes, waiting, finishing, state };
    for (const listener of this.listeners) listener();
  }

  private async pump(): Promise<void> {
    if (this.running || this.stopped || this.retryTimer) return;
    this.running = true;
    try {
      await this.ready;
      for (let item = this.head(); item && !this.stopped; item = this.head()) {
        if (!this.connectivity.isOnline()) {
          this.update({ state: "offline", retryAt: null });
          return; // the `online` event calls retryNow()
        }
        this.update({ state: "uploading", retryAt: null });
        try {
          await this.send(item);
        } catch (error) {
          const verdict = classifyFailure(error);
          if (verdict.retry) {
            this.scheduleRetry(verdict.message);
            return;
          }
          this.drop(item, verdict.message, verdict.detail);
          continue;
        }
        this.attempt = 0;
        this.items.delete(item.id);
        this.store.remove(item.id).catch(() => undefined);
        this.update({ lastError: "", uploaded: this.statusValue.uploaded + (item.kind === "chunk" ? 1 : 0) });
      }
      if (!this.stopped && this.items.size === 0) this.update({ state: "idle", retryAt: null });
    } finally {
      this.running = false;
    }
  }

  private scheduleRetry(message: string): void {
    if (!this.connectivity.isOnline()) {
      this.update({ state: "offline", retryAt: null, lastError: message });
      return;
    }
    const delay = backoffDelay(this.attempt, this.backoff, this.random);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.pump();
    }, delay);
    this.update({ state: "retrying", retryAt: Date.now() + delay, lastError: message });
  }

  /** The server refused this item for good. A refused chunk 0 takes its clip with it: every
   * later chunk continues chunk 0's stream and would be refused too. */
  private drop(item: UploadItem, message: string, detail: string): void {
    const doomed = [...this.items.values()].filter(
      (other) => other.id === item.id || (item.kind === "chunk" && item.index === 0 && other.clip.clientId === item.clip.clientId),
    );
    for (const other of doomed) {
      this.items.delete(other.id);
      this.store.remove(other.id).catch(() => undefined);
    }
    const lost = doomed.filter((other) => other.kind === "chunk" && other.id !== item.id).length;
    const failure: FailedUpload = { clientId: item.clip.clientId, index: item.index, lost, message, detail };
    this.update({ failed: [...this.statusValue.failed, failure].slice(-MAX_FAILED_SHOWN), lastError: "" });
  }

  private async send(item: UploadItem): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      let clipId = this.clipIds.get(item.clip.clientId);
      if (clipId === undefined) {
        clipId = (await this.calls.clipCreate(item.clip, controller.signal)).id;
        this.clipIds.set(item.clip.clientId, clipId);
      }
      if (item.kind === "chunk") {
        await this.calls.chunkPut(clipId, item.index, item.data ?? new Blob(), item.clip.contentType, item.start, controller.signal);
      } else {
        await this.calls.clipFinish(clipId, controller.signal);
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

const queues = new Map<string, UploadQueue>();

/**
 * The tab's queue for this user: one per tab, so it keeps uploading after the person leaves the
 * session page. Another user's queue stops (its chunks stay stored for when they log in again):
 * sent with this user's session, they would be refused, or filed under the wrong person.
 */
export function uploadQueueFor(owner: string): UploadQueue {
  for (const [other, queue] of queues) {
    if (other === owner) continue;
    queue.stop();
    queues.delete(other);
  }
  let queue = queues.get(owner);
  if (!queue) {
    queue = new UploadQueue({ owner });
    queues.set(owner, queue);
  }
  return queue;
}
