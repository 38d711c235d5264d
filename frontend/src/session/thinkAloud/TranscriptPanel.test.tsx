/** The think-aloud parts of the live session page, through the whole app with a fake server and socket. */
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { makeEpisode, makeStep } from "../../test/factories";
import { mockFetch, type RecordedRequest } from "../../test/http";
import { MockWebSocket } from "../../test/MockWebSocket";
import { renderApp } from "../../test/render";
import { FakeMediaRecorder, fakeStream } from "./fakeMedia";

let requests: RecordedRequest[];
let storedWords: unknown[];

beforeEach(() => {
  MockWebSocket.reset();
  vi.stubGlobal("WebSocket", MockWebSocket);
  storedWords = [
    { word: "The", start: 100.0, end: 100.2, step: 0, clip: 1, username: "ann" },
    { word: "button", start: 100.3, end: 100.7, step: 0, clip: 1, username: "ann" },
  ];
  requests = mockFetch({
    "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
    "GET /api/v1/episodes/42/": { body: makeEpisode([makeStep(0), makeStep(1)]) },
    "GET /api/v1/episodes/42/transcript": () => ({ body: { words: storedWords, clips: [] } }),
    "GET /api/v1/projects/1/": {
      body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "annotator", created_at: "" },
    },
    "GET /api/v1/projects/": { body: { results: [], next: null } },
    "GET /api/v1/health": { body: { status: "ok", checks: {} } },
  }).requests;
});
afterEach(() => vi.unstubAllGlobals());

async function openSession(username = "ann") {
  renderApp("/episodes/42");
  await screen.findByTestId("episode-screenshot");
  await waitFor(() => expect(MockWebSocket.instances.length).toBeGreaterThan(0));
  const socket = MockWebSocket.latest();
  act(() => {
    socket.open();
    socket.receive({ type: "hello", data: { server_time: 1_800_000_000, role: "annotator", username, after: 0 } });
  });
  return socket;
}

const stepText = (step: number) =>
  within(screen.getByTestId("transcript-panel"))
    .getAllByTestId("transcript-step")
    .find((el) => el.dataset.step === String(step))
    ?.querySelector("[data-testid=transcript-words]")?.textContent;

describe("think-aloud on the session page", () => {
  it("shows the stored transcript by step, then adds words live as they are transcribed", async () => {
    const socket = await openSession();
    await waitFor(() => expect(stepText(0)).toBe("The button"));
    act(() =>
      socket.receive({
        type: "transcript.words",
        seq: 5,
        data: {
          clip: 1,
          username: "ann",
          words: [
            { word: "button", start: 100.3, end: 100.7, step: 0 }, // seen already
            { word: "is", start: 101.0, end: 101.1, step: 1 },
            { word: "below", start: 101.2, end: 101.6, step: 2 },
          ],
        },
      }),
    );
    expect(stepText(0)).toBe("The button");
    expect(stepText(1)).toBe("is");
    expect(stepText(2)).toBe("below");
    expect(screen.getByTestId("transcript-count").textContent).toBe("4 words");
    const stepTwo = screen.getAllByTestId("transcript-step").find((el) => el.dataset.step === "2")!;
    expect(stepTwo.textContent).toContain("in progress"); // step 2 has not executed yet
  });

  it("shows provisional words while someone speaks, and the committed words replace them", async () => {
    const socket = await openSession();
    await waitFor(() => expect(stepText(0)).toBe("The button"));
    const interim = (words: { word: string; start: number; end: number }[]) =>
      act(() => socket.receive({ type: "transcript.interim", data: { clip: 3, username: "ann", committed_until: 110, words } }));
    interim([{ word: "Now", start: 110.1, end: 110.3 }]);
    expect(screen.getByTestId("transcript-interim").textContent).toBe("ann, speaking: Now");
    interim([
      { word: "Now", start: 110.1, end: 110.3 },
      { word: "I", start: 110.4, end: 110.5 },
      { word: "type", start: 110.6, end: 110.9 },
    ]);
    expect(screen.getByTestId("transcript-interim").textContent).toBe("ann, speaking: Now I type");
    expect(screen.getByTestId("transcript-count").textContent).toBe("2 words"); // provisional words are not counted
    act(() =>
      socket.receive({
        type: "transcript.words",
        seq: 6,
        data: { clip: 3, username: "ann", words: [{ word: "Now", start: 110.1, end: 110.3, step: 1 }, { word: "I", start: 110.4, end: 110.5, step: 1 }] },
      }),
    );
    expect(stepText(1)).toBe("Now I");
    expect(screen.getByTestId("transcript-interim").textContent).toBe("ann, speaking: type");
    act(() =>
      socket.receive({ type: "transcript.words", seq: 7, data: { clip: 3, username: "ann", words: [{ word: "type", start: 110.6, end: 110.9, step: 1 }] } }),
    );
    expect(screen.queryByTestId("transcript-interim")).toBeNull();
    expect(stepText(1)).toBe("Now I type");
  });

  it("reads the transcript again when the socket reconnects", async () => {
    const socket = await openSession();
    await waitFor(() => expect(stepText(0)).toBe("The button"));
    const reads = () => requests.filter((r) => r.url === "/api/v1/episodes/42/transcript").length;
    const before = reads();
    storedWords = [...storedWords, { word: "missed", start: 102, end: 102.4, step: 1, clip: 1, username: "ann" }];
    act(() => socket.drop());
    await waitFor(() => expect(MockWebSocket.instances.length).toBe(2), { timeout: 5000 });
    act(() => MockWebSocket.latest().open());
    await waitFor(() => expect(reads()).toBeGreaterThan(before));
    await waitFor(() => expect(stepText(1)).toBe("missed"));
  });

  it("gives the microphone to whoever may act, and only the transcript to a watcher", async () => {
    const socket = await openSession();
    expect(await screen.findByTestId("mic-control")).toBeTruthy();
    act(() => socket.receive({ type: "control.changed", seq: 3, data: { control: { username: "mia" } } }));
    expect(screen.queryByTestId("mic-control")).toBeNull();
    expect(screen.getByTestId("transcript-panel")).toBeTruthy();
  });

  it("stamps a recorded chunk with the server's clock from the socket's hello", async () => {
    FakeMediaRecorder.reset();
    vi.stubGlobal("MediaRecorder", FakeMediaRecorder);
    vi.stubGlobal("isSecureContext", true);
    vi.stubGlobal("navigator", Object.assign(Object.create(navigator), { mediaDevices: { getUserMedia: async () => fakeStream() } }));
    const fetches = mockFetch({
      "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
      "GET /api/v1/episodes/42/": { body: makeEpisode([makeStep(0)]) },
      "GET /api/v1/episodes/42/transcript": { body: { words: [], clips: [] } },
      "GET /api/v1/projects/1/": { body: { id: 1, slug: "d", name: "D", description: "", role: "annotator", created_at: "" } },
      "GET /api/v1/projects/": { body: { results: [], next: null } },
      "GET /api/v1/health": { body: { status: "ok", checks: {} } },
      "POST /api/v1/episodes/42/audio/": { status: 201, body: { id: 7 } },
      "PUT /api/v1/audio/7/chunks/0": { status: 201, body: { clip: 7, index: 0, size: 14, duplicate: false } },
      "POST /api/v1/audio/7/finish": { status: 202, body: { id: 7 } },
    }).requests;
    await openSession(); // hello: the server's clock reads 1_800_000_000 s now
    const serverNow = 1_800_000_000;
    fireEvent.click(await screen.findByTestId("mic-continuous"));
    await screen.findByTestId("recording-indicator");
    fireEvent.click(screen.getByTestId("mic-continuous"));
    await waitFor(() => expect(fetches.some((r) => r.url === "/api/v1/audio/7/finish")).toBe(true));
    const create = fetches.find((r) => r.url === "/api/v1/episodes/42/audio/")!;
    const put = fetches.find((r) => r.url === "/api/v1/audio/7/chunks/0")!;
    expect((create.body as { started_at: number }).started_at).toBeCloseTo(serverNow, -1);
    expect(Number(put.headers["X-Chunk-Start"])).toBeCloseTo(serverNow, -1);
    expect(put.headers["Content-Type"]).toBe("audio/webm;codecs=opus");
  });

  it("lists hold-M-to-talk among the shortcuts, and M does not send a command", async () => {
    const socket = await openSession();
    fireEvent.keyDown(window, { key: "?" });
    const overlay = await screen.findByTestId("shortcuts-overlay");
    expect(overlay.textContent).toContain("Hold to talk");
    fireEvent.keyDown(window, { key: "m" });
    fireEvent.keyUp(window, { key: "m" });
    expect(socket.sent).toEqual([]);
  });
});
