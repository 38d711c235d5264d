import { act, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ApiError } from "../../api/client";
import type { ClipMeta } from "../../api/audio";
import { SessionClock } from "./clock";
import { FakeMediaRecorder, fakeEnv } from "./fakeMedia";
import { MicrophoneControl } from "./MicrophoneControl";
import type { RecorderEnv } from "./recorder";
import { type AudioCalls, UploadQueue } from "./uploadQueue";
import { MemoryUploadStore } from "./uploadStore";

const HOUR_S = 3600;

interface Sent {
  call: string;
  clip?: ClipMeta;
  index?: number;
  start?: number;
  body?: string;
}

let sent: Sent[];
let failNext: number;
let queue: UploadQueue;

function recordingCalls(): AudioCalls {
  const refuse = () => {
    if (failNext > 0) {
      failNext -= 1;
      throw new ApiError({ kind: "http", status: 503, detail: "busy" });
    }
  };
  return {
    clipCreate: async (clip) => {
      refuse();
      sent.push({ call: "create", clip });
      return { id: 7 };
    },
    chunkPut: async (_clip, index, data, _type, start) => {
      refuse();
      sent.push({ call: "put", index, start, body: await data.text() });
      return {};
    },
    clipFinish: async () => {
      refuse();
      sent.push({ call: "finish" });
      return {};
    },
  };
}

/** A session clock that says the server is an hour ahead of this browser. */
function aheadClock(): SessionClock {
  const clock = new SessionClock();
  const now = performance.timeOrigin + performance.now();
  clock.observe({ serverTime: (now + HOUR_S * 1000) / 1000, connectingAt: now, openedAt: now, receivedAt: now });
  return clock;
}

function renderControl(env: RecorderEnv = fakeEnv(), clock = aheadClock()) {
  return render(<MicrophoneControl episodeId={42} username="ann" clock={clock} env={env} queue={queue} />);
}

beforeEach(() => {
  FakeMediaRecorder.reset();
  sent = [];
  failNext = 0;
  queue = new UploadQueue({
    owner: "ann",
    store: new MemoryUploadStore(),
    calls: recordingCalls(),
    connectivity: { isOnline: () => true, onOnline: () => () => undefined },
    random: () => 0,
  });
});
afterEach(() => queue.stop());

describe("MicrophoneControl", () => {
  it("records continuously: each 2 s chunk is uploaded as it comes, stamped on the server's clock", async () => {
    renderControl();
    fireEvent.click(screen.getByTestId("mic-continuous"));
    const indicator = await screen.findByTestId("recording-indicator");
    expect(indicator.dataset.mode).toBe("continuous");
    expect(indicator.textContent).toMatch(/Recording 0:0\d · continuous/);
    expect(screen.getByTestId("mic-hold")).toHaveProperty("disabled", true);

    const media = FakeMediaRecorder.latest();
    act(() => media.emit());
    await waitFor(() => expect(sent.map((s) => s.call)).toEqual(["create", "put"])); // as soon as it is ready
    act(() => media.emit());
    fireEvent.click(screen.getByTestId("mic-continuous")); // stop: the last chunk, then the finish
    await waitFor(() => expect(sent.map((s) => s.call)).toEqual(["create", "put", "put", "put", "finish"]));
    expect(screen.queryByTestId("recording-indicator")).toBeNull();

    const clip = sent[0].clip!;
    const serverNow = (Date.now() + HOUR_S * 1000) / 1000;
    expect(Math.abs(clip.startedAt - serverNow)).toBeLessThan(5); // corrected by the hello's offset
    expect(clip).toMatchObject({ episodeId: 42, contentType: "audio/webm;codecs=opus" });
    const puts = sent.filter((s) => s.call === "put");
    expect(puts.map((p) => [p.index, p.body])).toEqual([
      [0, "HEADER+audio-0"],
      [1, "audio-1"],
      [2, "audio-2"],
    ]);
    expect(puts[0].start).toBe(clip.startedAt);
    expect(puts[1].start!).toBeGreaterThanOrEqual(puts[0].start!);
    await waitFor(() => expect(screen.getByTestId("upload-status").textContent).toBe("All audio uploaded (3 chunks)."));
    expect(FakeMediaRecorder.instances).toHaveLength(1);
  });

  it("records while M is held, as one clip, and ends it on release", async () => {
    renderControl();
    fireEvent.keyDown(window, { key: "m" });
    expect((await screen.findByTestId("recording-indicator")).dataset.mode).toBe("push");
    fireEvent.keyDown(window, { key: "m", repeat: true }); // auto-repeat starts nothing new
    fireEvent.keyUp(window, { key: "m" });
    await waitFor(() => expect(sent.map((s) => s.call)).toEqual(["create", "put", "finish"]));
    expect(screen.queryByTestId("recording-indicator")).toBeNull();
    expect(FakeMediaRecorder.instances).toHaveLength(1);
    expect(screen.getByTestId("mic-control").dataset.phase).toBe("ready");
  });

  it("records while the button is held down", async () => {
    renderControl();
    const hold = screen.getByTestId("mic-hold");
    fireEvent.pointerDown(hold, { button: 0, pointerId: 1 });
    await screen.findByTestId("recording-indicator");
    expect(hold.textContent).toContain("release to stop");
    fireEvent.pointerUp(hold, { pointerId: 1 });
    await waitFor(() => expect(sent.at(-1)?.call).toBe("finish"));
  });

  it("says how to allow the microphone when permission is denied", async () => {
    renderControl(fakeEnv({ failWith: "NotAllowedError" }));
    fireEvent.click(screen.getByTestId("mic-continuous"));
    const problem = await screen.findByTestId("mic-problem");
    expect(problem.dataset.kind).toBe("denied");
    expect(problem.textContent).toMatch(/Microphone blocked.*set Microphone to Allow/);
    expect(screen.queryByTestId("recording-indicator")).toBeNull();
    expect(FakeMediaRecorder.instances).toHaveLength(0);
  });

  it("says to connect a microphone when there is none", async () => {
    renderControl(fakeEnv({ failWith: "NotFoundError" }));
    fireEvent.keyDown(window, { key: "m" });
    const problem = await screen.findByTestId("mic-problem");
    expect(problem.dataset.kind).toBe("no-device");
    expect(problem.textContent).toMatch(/No microphone was found/);
  });

  it("disables recording on a page that is not secure, and says to use https or localhost", () => {
    renderControl({ ...fakeEnv({ secure: false }), mediaDevices: undefined });
    expect(screen.getByTestId("mic-problem").dataset.kind).toBe("insecure");
    expect(screen.getByTestId("mic-problem").textContent).toMatch(/https:\/\/.*localhost/);
    expect(screen.getByTestId("mic-hold")).toHaveProperty("disabled", true);
    expect(screen.getByTestId("mic-continuous")).toHaveProperty("disabled", true);
  });

  it("waits for the socket's hello before it can stamp chunks on the session clock", async () => {
    const clock = new SessionClock();
    renderControl(fakeEnv(), clock);
    expect(screen.getByTestId("mic-continuous")).toHaveProperty("disabled", true);
    expect(screen.getByText(/Waiting for the live connection/)).toBeTruthy();
    act(() => {
      clock.observe({ serverTime: 1, connectingAt: 0, openedAt: 0, receivedAt: 0 });
    });
    expect(screen.getByTestId("mic-continuous")).toHaveProperty("disabled", false);
  });

  it("shows chunks waiting and when the next retry is", async () => {
    failNext = 1;
    renderControl();
    fireEvent.keyDown(window, { key: "m" });
    await screen.findByTestId("recording-indicator");
    act(() => FakeMediaRecorder.latest().emit());
    const status = screen.getByTestId("upload-status");
    await waitFor(() => expect(status.dataset.state).toBe("retrying"));
    expect(status.textContent).toMatch(/^1 chunk waiting, retrying in 1 s \(The server is busy or failing\.\)/);
    fireEvent.click(screen.getByText("Retry now"));
    await waitFor(() => expect(status.dataset.uploaded).toBe("1"));
    fireEvent.keyUp(window, { key: "m" });
    await waitFor(() => expect(sent.at(-1)?.call).toBe("finish"));
  });

  it("frees the microphone and ends the clip when it leaves the page", async () => {
    const view = renderControl();
    fireEvent.click(screen.getByTestId("mic-continuous"));
    await screen.findByTestId("recording-indicator");
    const media = FakeMediaRecorder.latest();
    view.unmount();
    expect(media.state).toBe("inactive");
    await waitFor(() => expect(sent.map((s) => s.call)).toEqual(["create", "put", "finish"]));
  });
});
