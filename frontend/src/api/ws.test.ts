// @vitest-environment node
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { MockWebSocket } from "../test/MockWebSocket";
import { backoffDelay, type ConnectionState, EpisodeSocket, episodeSocketUrl, type ServerMessage } from "./ws";

function makeSocket(after = 0) {
  const received: ServerMessage[] = [];
  const states: ConnectionState[] = [];
  const socket = new EpisodeSocket({
    episodeId: 7,
    after,
    onMessage: (m) => received.push(m),
    // The callback also fires when only the detail text changes; record each state once.
    onStateChange: (s) => states[states.length - 1] !== s && states.push(s),
    createSocket: (url) => new MockWebSocket(url) as unknown as WebSocket,
    url: (id, seq) => `ws://test/ws/episodes/${id}/?after=${seq}`,
    backoff: { initialMs: 100, maxMs: 1000, jitter: 0 },
  });
  return { socket, received, states };
}

beforeEach(() => {
  MockWebSocket.reset();
  vi.useFakeTimers();
});
afterEach(() => vi.useRealTimers());

describe("EpisodeSocket", () => {
  it("drops messages whose seq it has already seen", () => {
    const { socket, received } = makeSocket();
    socket.start();
    const ws = MockWebSocket.latest();
    ws.open();
    for (const seq of [1, 2, 2, 1, 3, 3]) ws.receive({ type: "step.executed", seq, data: { index: seq } });
    expect(received.map((m) => m.seq)).toEqual([1, 2, 3]);
    expect(socket.lastSeq).toBe(3);
  });

  it("reconnects with backoff asking only for events after the last seq", () => {
    const { socket, received, states } = makeSocket(4);
    socket.start();
    expect(MockWebSocket.latest().url).toBe("ws://test/ws/episodes/7/?after=4");
    MockWebSocket.latest().open();
    MockWebSocket.latest().receive({ type: "episode.state", seq: 5, data: {} });
    MockWebSocket.latest().receive({ type: "step.executed", seq: 6, data: {} });
    MockWebSocket.latest().drop(1006);
    expect(socket.state).toBe("reconnecting");
    expect(MockWebSocket.instances).toHaveLength(1);

    vi.advanceTimersByTime(99);
    expect(MockWebSocket.instances).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(MockWebSocket.instances).toHaveLength(2);
    const second = MockWebSocket.latest();
    expect(second.url).toBe("ws://test/ws/episodes/7/?after=6");

    second.open();
    // The server replays from 6 on, but a stray older event must still be dropped.
    second.receive({ type: "step.executed", seq: 6, data: {} });
    second.receive({ type: "step.executed", seq: 7, data: {} });
    expect(received.map((m) => m.seq)).toEqual([5, 6, 7]);
    expect(states).toEqual(["connecting", "open", "reconnecting", "open"]);
  });

  it("doubles the wait after each failed attempt, up to the cap", () => {
    const { socket } = makeSocket();
    socket.start();
    MockWebSocket.latest().drop();
    vi.advanceTimersByTime(100);
    MockWebSocket.latest().drop();
    vi.advanceTimersByTime(199);
    expect(MockWebSocket.instances).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(MockWebSocket.instances).toHaveLength(3);
    expect(backoffDelay(10, { initialMs: 100, maxMs: 1000, jitter: 0 })).toBe(1000);
  });

  it("stops for good on 4401 and 4403, saying why", () => {
    const { socket } = makeSocket();
    socket.start();
    MockWebSocket.latest().drop(4401);
    expect(socket.state).toBe("closed");
    expect(socket.detail).toMatch(/Not logged in/);
    vi.advanceTimersByTime(60_000);
    expect(MockWebSocket.instances).toHaveLength(1);

    const other = makeSocket();
    other.socket.start();
    MockWebSocket.latest().drop(4403);
    expect(other.socket.state).toBe("closed");
    expect(other.socket.detail).toMatch(/not allowed/);
  });

  it("gives each command a client id and resends unacknowledged ones after reconnecting", () => {
    const { socket, received } = makeSocket();
    socket.start();
    const first = MockWebSocket.latest();
    first.open();
    const id = socket.send({ type: "pause" });
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(first.sent).toEqual([{ type: "pause", id }]);

    first.drop();
    vi.advanceTimersByTime(100);
    const second = MockWebSocket.latest();
    second.open();
    expect(second.sent).toEqual([{ type: "pause", id }]);

    second.receive({ type: "ack", id });
    expect(socket.pendingCommands).toBe(0);
    expect(received).toEqual([{ type: "ack", id }]);
    expect(socket.send({ type: "resume" })).not.toBe(id);
  });

  it("forgets a command the server refused, so a reconnect does not resend it", () => {
    const { socket, received } = makeSocket();
    socket.start();
    const first = MockWebSocket.latest();
    first.open();
    const refused = socket.send({ type: "approve", index: 3 });
    const waiting = socket.send({ type: "pause" });
    first.receive({ type: "error", id: refused, data: { message: "Nothing is proposed right now." } });
    // A broadcast error (with seq) about someone's stored command settles nothing of ours.
    first.receive({ type: "error", seq: 1, data: { message: "Take over first.", command: waiting } });
    expect(socket.pendingCommands).toBe(1);
    expect(received.map((m) => m.type)).toEqual(["error", "error"]);

    first.drop();
    vi.advanceTimersByTime(100);
    const second = MockWebSocket.latest();
    second.open();
    expect(second.sent).toEqual([{ type: "pause", id: waiting }]);
  });

  it("does not reconnect after close()", () => {
    const { socket } = makeSocket();
    socket.start();
    MockWebSocket.latest().open();
    socket.close();
    vi.advanceTimersByTime(60_000);
    expect(MockWebSocket.instances).toHaveLength(1);
    expect(socket.state).toBe("closed");
  });

  it("builds ws:// or wss:// URLs to match the page", () => {
    expect(episodeSocketUrl(3, 9, { protocol: "https:", host: "loupe.example" } as Location)).toBe(
      "wss://loupe.example/ws/episodes/3/?after=9",
    );
    expect(episodeSocketUrl(3, 0, { protocol: "http:", host: "localhost:8000" } as Location)).toBe(
      "ws://localhost:8000/ws/episodes/3/?after=0",
    );
  });
});
