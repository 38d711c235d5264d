import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../../api/client";
import type { ClipMeta } from "../../api/audio";
import {
  type AudioCalls,
  classifyFailure,
  type Connectivity,
  UploadQueue,
  uploadQueueFor,
  uploadStatusText,
} from "./uploadQueue";
import { MemoryUploadStore } from "./uploadStore";

const clipA: ClipMeta = { episodeId: 42, clientId: "clip-a", contentType: "audio/webm;codecs=opus", startedAt: 1000 };
const clipB: ClipMeta = { ...clipA, clientId: "clip-b", startedAt: 1010 };

/** What the next call does instead of answering: fail (after storing, when the answer is what is lost), or, with error null, answer. */
type Failure = { error: unknown; afterStoring?: boolean };

/** The server's side of the contract: idempotent clip creation and chunk PUTs, 409 on other bytes. */
function fakeServer() {
  const clips = new Map<string, number>();
  const chunks = new Map<string, string>(); // "<clip id>/<index>" -> bytes
  const finished = new Set<number>();
  const log: string[] = [];
  const failures: Failure[] = [];
  async function maybeFail(store: () => void) {
    const failure = failures.shift();
    if (failure?.afterStoring) store(); // stored, but the answer is lost on the way back
    if (failure?.error) throw failure.error;
    store();
  }
  const calls: AudioCalls = {
    clipCreate: async (meta) => {
      log.push(`create ${meta.clientId}`);
      let id = clips.get(meta.clientId);
      await maybeFail(() => {
        id ??= clips.size + 1;
        clips.set(meta.clientId, id);
      });
      return { id: id! };
    },
    chunkPut: async (clipId, index, data, _type, start) => {
      log.push(`put ${clipId}/${index} @${start}`);
      const bytes = await data.text();
      const key = `${clipId}/${index}`;
      if (chunks.has(key) && chunks.get(key) !== bytes)
        throw new ApiError({ kind: "http", status: 409, detail: `Chunk ${index} is already stored with other content.` });
      await maybeFail(() => chunks.set(key, bytes));
      return {};
    },
    clipFinish: async (clipId) => {
      log.push(`finish ${clipId}`);
      await maybeFail(() => finished.add(clipId));
      return {};
    },
  };
  return { calls, clips, chunks, finished, log, failures };
}

function fakeConnectivity() {
  const listeners = new Set<() => void>();
  const connectivity: Connectivity & { online: boolean; setOnline: (online: boolean) => void } = {
    online: true,
    isOnline: () => connectivity.online,
    onOnline: (fn) => {
      listeners.add(fn);
      return () => listeners.delete(fn);
    },
    setOnline: (online) => {
      connectivity.online = online;
      if (online) for (const fn of listeners) fn();
    },
  };
  return connectivity;
}

const networkDown = () => new ApiError({ kind: "network", status: 0, detail: "Could not reach the Loupe server." });
const http = (status: number, detail = "refused") => new ApiError({ kind: "http", status, detail });
const blob = (text: string) => new Blob([text], { type: "audio/webm;codecs=opus" });
const settle = () => vi.advanceTimersByTimeAsync(0);

let server: ReturnType<typeof fakeServer>;
let connectivity: ReturnType<typeof fakeConnectivity>;
let queue: UploadQueue;

function makeQueue(store = new MemoryUploadStore(), owner = "ann") {
  return new UploadQueue({ owner, store, calls: server.calls, connectivity, random: () => 0 });
}

beforeEach(() => {
  vi.useFakeTimers();
  server = fakeServer();
  connectivity = fakeConnectivity();
  queue = makeQueue();
});
afterEach(() => {
  queue.stop();
  vi.useRealTimers();
});

describe("UploadQueue", () => {
  it("creates the clip once, then sends chunk 0, the later chunks and the finish, in that order", async () => {
    queue.addChunk(clipA, 0, 1000, blob("header+a0"));
    queue.addChunk(clipA, 1, 1002, blob("a1"));
    queue.addFinish(clipA);
    await settle();
    expect(server.log).toEqual(["create clip-a", "put 1/0 @1000", "put 1/1 @1002", "finish 1"]);
    expect(queue.status).toMatchObject({ state: "idle", waiting: 0, finishing: 0, uploaded: 2 });
    expect(uploadStatusText(queue.status, Date.now())).toBe("All audio uploaded (2 chunks).");
  });

  it("retries a chunk with exponential backoff until the server answers, then goes on", async () => {
    server.failures.push({ error: http(503) }, { error: http(503) }, { error: null }, { error: networkDown() });
    queue.addChunk(clipA, 0, 1000, blob("a0"));
    queue.addChunk(clipA, 1, 1002, blob("a1"));
    await settle();
    expect(server.log).toEqual(["create clip-a"]); // 503
    expect(queue.status).toMatchObject({ state: "retrying", waiting: 2 });
    expect(uploadStatusText(queue.status, Date.now())).toMatch(/^2 chunks waiting, retrying in 1 s/);

    await vi.advanceTimersByTimeAsync(999);
    expect(server.log).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1); // 1 s: second 503
    expect(server.log).toHaveLength(2);
    expect(uploadStatusText(queue.status, Date.now())).toMatch(/retrying in 2 s/);
    await vi.advanceTimersByTimeAsync(2000); // 2 s: clip created, chunk 0 gets no answer
    expect(server.log).toEqual(["create clip-a", "create clip-a", "create clip-a", "put 1/0 @1000"]);
    expect(uploadStatusText(queue.status, Date.now())).toMatch(/^2 chunks waiting, retrying in 4 s \(Could not reach/);
    await vi.advanceTimersByTimeAsync(4000);
    expect(server.log.slice(4)).toEqual(["put 1/0 @1000", "put 1/1 @1002"]);
    expect(queue.status).toMatchObject({ state: "idle", waiting: 0, uploaded: 2, lastError: "" });
    expect([...server.chunks.values()]).toEqual(["a0", "a1"]);
  });

  it("re-sends a chunk whose answer was lost, and the server stores it once", async () => {
    server.failures.push({ error: networkDown() }); // for the create: fine, no answer
    queue.addChunk(clipA, 0, 1000, blob("a0"));
    await settle();
    server.failures.push({ error: null }, { error: networkDown(), afterStoring: true });
    await vi.advanceTimersByTimeAsync(1000); // create ok, PUT stored but its answer lost
    expect(server.chunks.size).toBe(1);
    expect(queue.status.waiting).toBe(1);
    await vi.advanceTimersByTimeAsync(2000); // the same PUT again: the same bytes, so 200
    expect(queue.status).toMatchObject({ waiting: 0, uploaded: 1 });
    expect(server.chunks).toEqual(new Map([["1/0", "a0"]]));
    expect(server.clips.size).toBe(1);
  });

  it("waits while offline and sends everything recorded meanwhile when the browser is back online", async () => {
    connectivity.online = false;
    queue.addChunk(clipA, 0, 1000, blob("a0"));
    queue.addChunk(clipA, 1, 1002, blob("a1"));
    queue.addChunk(clipA, 2, 1004, blob("a2"));
    queue.addFinish(clipA);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(server.log).toEqual([]);
    expect(queue.status.state).toBe("offline");
    expect(uploadStatusText(queue.status, Date.now())).toBe(
      "Offline: 3 chunks waiting; they upload when the connection returns.",
    );

    connectivity.setOnline(true);
    await settle();
    expect(server.log).toEqual(["create clip-a", "put 1/0 @1000", "put 1/1 @1002", "put 1/2 @1004", "finish 1"]);
    expect(server.chunks.size).toBe(3);
    expect(queue.status).toMatchObject({ state: "idle", waiting: 0, uploaded: 3 });
  });

  it("goes offline when a request fails and the browser says the network is gone", async () => {
    const create = server.calls.clipCreate;
    server.calls.clipCreate = async (meta, signal) => {
      if (server.log.length === 0) {
        server.log.push("create (cable pulled)");
        connectivity.online = false;
        throw networkDown();
      }
      return create(meta, signal);
    };
    queue.addChunk(clipA, 0, 1000, blob("a0"));
    await settle();
    expect(queue.status).toMatchObject({ state: "offline", waiting: 1, retryAt: null });
    await vi.advanceTimersByTimeAsync(120_000);
    expect(server.log).toEqual(["create (cable pulled)"]); // no retries burnt while offline
    connectivity.setOnline(true);
    await settle();
    expect(queue.status).toMatchObject({ state: "idle", waiting: 0, uploaded: 1 });
    expect(server.chunks).toEqual(new Map([["1/0", "a0"]]));
  });

  it("drops a chunk 0 the server refuses, with the rest of its clip, says why, and goes on with the next clip", async () => {
    queue.addChunk(clipA, 0, 1000, blob("garbage"));
    queue.addChunk(clipA, 1, 1002, blob("a1"));
    queue.addFinish(clipA);
    queue.addChunk(clipB, 0, 1010, blob("b0"));
    const put = server.calls.chunkPut;
    server.calls.chunkPut = async (clipId, index, data, type, start, signal) => {
      if ((await data.text()) === "garbage") throw http(400, "chunk 0 holds no decodable WebM audio");
      return put(clipId, index, data, type, start, signal);
    };
    await settle();
    expect(queue.status.failed).toEqual([
      {
        clientId: "clip-a",
        index: 0,
        lost: 1,
        message: "The server could not read this piece of the recording.",
        detail: "chunk 0 holds no decodable WebM audio",
      },
    ]);
    expect(server.chunks).toEqual(new Map([["2/0", "b0"]]));
    expect(server.finished.size).toBe(0);
    expect(queue.status).toMatchObject({ waiting: 0, state: "idle" });
  });

  it("keeps waiting items in its store until they are stored, and a new page's queue sends them", async () => {
    const store = new MemoryUploadStore();
    queue.stop();
    connectivity.online = false;
    queue = makeQueue(store);
    await queue.whenReady();
    queue.addChunk(clipA, 0, 1000, blob("a0"));
    queue.addChunk(clipA, 1, 1002, blob("a1"));
    await settle();
    expect([...store.items.keys()]).toEqual(["clip-a:0", "clip-a:1"]);
    queue.stop(); // the tab closes

    connectivity.online = true;
    await store.put({ ...store.items.get("clip-a:0")!, id: "other:0", owner: "bob" });
    queue = makeQueue(store); // the page is opened again
    await settle();
    expect(server.log).toEqual(["create clip-a", "put 1/0 @1000", "put 1/1 @1002"]);
    expect([...store.items.keys()]).toEqual(["other:0"]); // bob's chunk waits for bob
  });
});

describe("uploadQueueFor", () => {
  it("keeps one queue a tab, and stops the last user's when another logs in", () => {
    const ann = uploadQueueFor("ann");
    expect(uploadQueueFor("ann")).toBe(ann);
    const stop = vi.spyOn(ann, "stop");
    const bob = uploadQueueFor("bob");
    expect(bob).not.toBe(ann);
    expect(stop).toHaveBeenCalled();
    expect(uploadQueueFor("ann")).not.toBe(ann); // a fresh one, which restores ann's stored chunks
    bob.stop();
  });
});

describe("classifyFailure", () => {
  it("retries what may pass and gives up on what the server refuses for good", () => {
    expect(classifyFailure(networkDown()).retry).toBe(true);
    expect(classifyFailure(new DOMException("aborted", "AbortError")).retry).toBe(true);
    expect(classifyFailure(http(502)).retry).toBe(true);
    expect(classifyFailure(http(429)).retry).toBe(true);
    expect(classifyFailure(http(401))).toMatchObject({ retry: true, message: expect.stringContaining("log in again") });
    for (const status of [400, 403, 404, 409, 413, 415]) {
      expect(classifyFailure(http(status, "why")).retry).toBe(false);
    }
    expect(classifyFailure(http(415, "Audio of type 'x' is not accepted")).detail).toBe("Audio of type 'x' is not accepted");
  });

  it("tells the person what a refusal means in plain words, never the server's protocol text", () => {
    const protocol = /chunk|WebM|header|\d{3}|content type/i;
    for (const status of [400, 403, 404, 409, 413, 415, 418, 500, 429]) {
      const { message } = classifyFailure(http(status, "this chunk (after chunk 0) holds no decodable WebM audio"));
      expect(message).not.toMatch(protocol);
      expect(message).toMatch(/^[A-Z].*\.$/);
    }
  });
});
