/**
 * The one WebSocket client: follows `/ws/episodes/<id>/?after=<seq>`.
 *
 * The server numbers every message of an episode with an increasing `seq` and, on connect,
 * replays what came after `after`. So this client remembers the last seq it handed on,
 * reconnects with backoff from there, and drops anything at or below it: a page sees each
 * event exactly once, in order, across reconnects.
 */

export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

export interface ServerMessage {
  type: string;
  /** Absent on per-connection messages (`hello`, `ack`, `presence`, an `error` about your own frame). */
  seq?: number;
  /** The client command id an `ack` (or a refusing `error`) answers; null when the frame had none. */
  id?: string | null;
  /** On `ack`: "accepted" (stored, the worker will apply it) or "applied". */
  status?: string;
  /** On `ack`: the command type acknowledged. */
  command?: string;
  duplicate?: boolean;
  /** The event payload; its shape depends on `type` (see session/episodeState.ts). */
  data?: object;
}

/** A client command (`pause`, `approve`, `act`, ...) before the client gives it an id. */
export interface Command {
  type: string;
  [field: string]: unknown;
}

/** Close codes the server uses for auth failures; retrying cannot help with these. */
export const CLOSE_NOT_LOGGED_IN = 4401;
export const CLOSE_NOT_ALLOWED = 4403;

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** Share of the delay drawn at random (0..1), so many tabs do not reconnect in step. */
  jitter: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 15_000, jitter: 0.2 };

/** Delay before reconnect attempt `attempt` (0-based): doubling from initialMs, capped at maxMs. */
export function backoffDelay(attempt: number, options: BackoffOptions = DEFAULT_BACKOFF, random = Math.random): number {
  const base = Math.min(options.maxMs, options.initialMs * 2 ** attempt);
  return Math.round(base * (1 - options.jitter * random()));
}

/** `ws://host/ws/episodes/7/?after=12`, with the scheme that matches the page's. */
export function episodeSocketUrl(episodeId: number, after: number, location: Location = window.location): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/ws/episodes/${episodeId}/?after=${after}`;
}

type WebSocketFactory = (url: string) => WebSocket;

export interface EpisodeSocketOptions {
  episodeId: number;
  /** Start after this seq (0: replay everything). */
  after?: number;
  onMessage: (message: ServerMessage) => void;
  onStateChange?: (state: ConnectionState, detail: string) => void;
  backoff?: BackoffOptions;
  /** Injected in tests. */
  createSocket?: WebSocketFactory;
  url?: (episodeId: number, after: number) => string;
  random?: () => number;
}

export class EpisodeSocket {
  private readonly options: EpisodeSocketOptions;
  private socket: WebSocket | null = null;
  private attempt = 0;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  private lastSeqValue: number;
  private stateValue: ConnectionState = "closed";
  private detailValue = "";
  /** Commands sent but not yet acknowledged, resent after a reconnect (the server dedupes by id). */
  private readonly unacked = new Map<string, Record<string, unknown>>();
  /** `performance.now()` when the current connection began and when it opened: they bound when
   * the server stamped its `hello`, so the page can tell its clock from the server's. */
  connectingAt = 0;
  openedAt = 0;

  constructor(options: EpisodeSocketOptions) {
    this.options = options;
    this.lastSeqValue = options.after ?? 0;
  }

  get state(): ConnectionState {
    return this.stateValue;
  }

  /** Why the state is what it is ("Not logged in.", "Connection lost; retrying in 2 s"). */
  get detail(): string {
    return this.detailValue;
  }

  get lastSeq(): number {
    return this.lastSeqValue;
  }

  get pendingCommands(): number {
    return this.unacked.size;
  }

  start(): void {
    this.stopped = false;
    this.connect("connecting");
  }

  /** Skip the backoff wait (a person pressed "Retry now"); also revives a closed socket. */
  reconnectNow(): void {
    if (this.stateValue === "open" || this.stateValue === "connecting") return;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.stopped = false;
    this.attempt = 0;
    this.connect("reconnecting");
  }

  /** Stop for good: no reconnect after this. */
  close(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const socket = this.socket;
    this.socket = null;
    if (socket && socket.readyState < 2) socket.close(1000, "client closed");
    this.setState("closed", "");
  }

  /**
   * Send a command with a fresh client id and return the id (its `ack` carries it back).
   * While disconnected the command waits and goes out on the next open.
   */
  send(command: Command): string {
    const id = crypto.randomUUID();
    const message = { ...command, id };
    this.unacked.set(id, message);
    if (this.socket && this.stateValue === "open") this.socket.send(JSON.stringify(message));
    return id;
  }

  private setState(state: ConnectionState, detail: string): void {
    if (state === this.stateValue && detail === this.detailValue) return;
    this.stateValue = state;
    this.detailValue = detail;
    this.options.onStateChange?.(state, detail);
  }

  private connect(state: ConnectionState): void {
    if (this.stopped) return;
    this.setState(state, state === "reconnecting" ? "Reconnecting…" : "");
    const url = (this.options.url ?? episodeSocketUrl)(this.options.episodeId, this.lastSeqValue);
    this.connectingAt = performance.now();
    const socket = (this.options.createSocket ?? ((u: string) => new WebSocket(u)))(url);
    this.socket = socket;

    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.openedAt = performance.now();
      this.attempt = 0;
      this.setState("open", "");
      for (const message of this.unacked.values()) socket.send(JSON.stringify(message));
    };
    socket.onmessage = (event: MessageEvent) => {
      if (this.socket !== socket) return;
      this.receive(event.data);
    };
    socket.onclose = (event: CloseEvent) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.closed(event.code);
    };
    // An error is always followed by a close event; the close decides what happens next.
    socket.onerror = () => undefined;
  }

  private receive(raw: unknown): void {
    let message: ServerMessage;
    try {
      message = JSON.parse(String(raw)) as ServerMessage;
    } catch {
      return; // Not ours to interpret; the server only sends JSON.
    }
    if (!message || typeof message.type !== "string") return;
    // An ack, or a refusal of one of our own frames (an error without seq), settles the command:
    // resending a refused one after a reconnect would only be refused again.
    if (message.type === "ack" || (message.type === "error" && typeof message.seq !== "number")) {
      if (message.id) this.unacked.delete(message.id);
      this.options.onMessage(message);
      return;
    }
    if (typeof message.seq === "number") {
      if (message.seq <= this.lastSeqValue) return; // Replayed or duplicated: seen already.
      this.lastSeqValue = message.seq;
    }
    this.options.onMessage(message);
  }

  private closed(code: number): void {
    if (this.stopped) return;
    if (code === CLOSE_NOT_LOGGED_IN) {
      this.stopped = true;
      this.setState("closed", "Not logged in. Log in again to follow this episode.");
      return;
    }
    if (code === CLOSE_NOT_ALLOWED) {
      this.stopped = true;
      this.setState("closed", "You are not allowed to watch this episode.");
      return;
    }
    const delay = backoffDelay(this.attempt, this.options.backoff ?? DEFAULT_BACKOFF, this.options.random);
    this.attempt += 1;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect("reconnecting");
    }, delay);
    this.setState("reconnecting", `Connection lost; retrying in ${Math.max(1, Math.round(delay / 1000))} s`);
  }
}
