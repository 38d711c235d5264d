/**
 * The session clock: the server's epoch seconds, which audio chunks are stamped with and steps
 * are timed on (annotation/audio.py). The browser's own clock may be off by seconds, so the
 * offset is measured from the socket's `hello`, which carries the server's time.
 *
 * Times on this side are `performance` milliseconds (monotonic, so a system clock change cannot
 * move a recording) made absolute with `performance.timeOrigin`.
 */

/** One `hello`, with the moments (browser ms) around it. */
export interface HelloSample {
  /** `hello.data.server_time`: server epoch seconds when it sent the hello. */
  serverTime: number;
  /** When the socket began connecting (the upgrade request left). */
  connectingAt: number;
  /** When the socket opened (the server's 101 arrived). */
  openedAt: number;
  /** When the hello arrived. */
  receivedAt: number;
}

export interface OffsetEstimate {
  /** Add to a browser time (ms) to get session time (ms). */
  offsetMs: number;
  /** How far off the estimate may be, at most (ms). */
  uncertaintyMs: number;
}

/**
 * The offset from one hello. The server stamped it after it had the upgrade request and before
 * the hello reached us, so the true offset lies within [serverTime - receivedAt, serverTime -
 * connectingAt]. The hello travelled one way, about half a round trip; the upgrade took about
 * two (TCP and HTTP), so a quarter of it estimates that trip.
 */
export function offsetFromHello(sample: HelloSample): OffsetEstimate {
  const server = sample.serverTime * 1000;
  const span = Math.max(0, sample.receivedAt - sample.connectingAt);
  const oneWay = Math.min(span, Math.max(0, sample.openedAt - sample.connectingAt) / 4);
  return { offsetMs: server - (sample.receivedAt - oneWay), uncertaintyMs: span };
}

/** Browser time now, absolute ms (like Date.now(), but monotonic within the page). */
export function browserNowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Browser absolute ms for a `performance.now()` / `Event.timeStamp` value. */
export function browserMsFromPerformance(performanceMs: number): number {
  return performance.timeOrigin + performanceMs;
}

export class SessionClock {
  private best: OffsetEstimate | null = null;
  private readonly listeners = new Set<() => void>();

  /** Whether a hello has been seen, so session times can be given. */
  get known(): boolean {
    return this.best !== null;
  }

  get offsetMs(): number | null {
    return this.best?.offsetMs ?? null;
  }

  get uncertaintyMs(): number | null {
    return this.best?.uncertaintyMs ?? null;
  }

  /**
   * Take a hello into account. Each reconnect brings one; the tightest (the one that arrived
   * fastest) wins, as in Cristian's algorithm, since the monotonic clock keeps it valid.
   */
  observe(sample: HelloSample): OffsetEstimate {
    const estimate = offsetFromHello(sample);
    if (this.best === null || estimate.uncertaintyMs <= this.best.uncertaintyMs) {
      this.best = estimate;
      for (const listener of this.listeners) listener();
    }
    return estimate;
  }

  /** Session seconds (server epoch) at browser time `browserMs` (absolute ms); null until known. */
  sessionSeconds(browserMs: number): number | null {
    return this.best === null ? null : (browserMs + this.best.offsetMs) / 1000;
  }

  /** Session seconds now; null until known. */
  now(): number | null {
    return this.sessionSeconds(browserNowMs());
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
