import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FakeMediaRecorder, fakeEnv } from "./fakeMedia";
import { levelFromSamples, microphoneProblem, supportProblem, ThinkAloudRecorder, TIMESLICE_MS } from "./recorder";

beforeEach(() => FakeMediaRecorder.reset());
afterEach(() => vi.restoreAllMocks());

describe("microphone problems", () => {
  it("tells a person whose permission was refused how to allow the microphone", () => {
    const problem = microphoneProblem(new DOMException("Permission denied", "NotAllowedError"));
    expect(problem.kind).toBe("denied");
    expect(problem.message).toMatch(/address bar.*Allow/);
  });

  it("tells a person without a microphone to connect one", () => {
    const problem = microphoneProblem(new DOMException("Requested device not found", "NotFoundError"));
    expect(problem.kind).toBe("no-device");
    expect(problem.message).toMatch(/No microphone was found.*Plug one in/);
  });

  it("says a microphone in use elsewhere is busy, and anything else what it was", () => {
    expect(microphoneProblem(new DOMException("Could not start", "NotReadableError")).kind).toBe("busy");
    expect(microphoneProblem(new Error("strange")).message).toMatch(/could not be opened \(strange\)/);
  });

  it("sends a page that is not a secure context to https or localhost", () => {
    const problem = supportProblem({ ...fakeEnv({ secure: false }), mediaDevices: undefined });
    expect(problem?.kind).toBe("insecure");
    expect(problem?.message).toMatch(/https:\/\/.*localhost/);
    expect(problem?.message).toContain("http://127.0.0.1:8000");
  });

  it("names a browser without MediaRecorder, or without Opus, unsupported", () => {
    expect(supportProblem(fakeEnv({ recorder: false }))?.message).toMatch(/no MediaRecorder/);
    FakeMediaRecorder.supported = ["audio/mp4"];
    expect(supportProblem(fakeEnv())?.message).toMatch(/cannot record Opus/);
    FakeMediaRecorder.supported = ["audio/ogg;codecs=opus"];
    expect(supportProblem(fakeEnv())).toBeNull();
    expect(new ThinkAloudRecorder(fakeEnv()).mimeType).toBe("audio/ogg;codecs=opus");
  });

  it("rejects open() with the problem, having asked once", async () => {
    const env = fakeEnv({ failWith: "NotAllowedError" });
    const recorder = new ThinkAloudRecorder(env);
    await expect(recorder.open()).rejects.toMatchObject({ kind: "denied" });
    expect(env.requests).toBe(1);
    expect(recorder.isOpen).toBe(false);
  });
});

describe("ThinkAloudRecorder", () => {
  it("records one clip as one MediaRecorder run in 2 s slices, each chunk starting where the last ended", async () => {
    const recorder = new ThinkAloudRecorder(fakeEnv());
    await recorder.open();
    const now = vi.spyOn(performance, "now");
    const chunks: [number, number, string][] = [];
    const events: string[] = [];
    now.mockReturnValue(1000);
    recorder.start({
      onStart: (at) => events.push(`start ${at}`),
      onChunk: (index, start) => chunks.push([index, start, ""]),
      onStop: (count) => events.push(`stop ${count}`),
    });
    const media = FakeMediaRecorder.latest();
    expect(media.timeslice).toBe(TIMESLICE_MS);
    expect(media.options?.mimeType).toBe("audio/webm;codecs=opus");
    now.mockReturnValue(3001);
    media.emit();
    now.mockReturnValue(5002);
    media.emit(""); // an empty slice: its audio comes with the next chunk
    now.mockReturnValue(5003);
    media.emit();
    now.mockReturnValue(5500);
    recorder.stop();
    expect(events).toEqual(["start 1000", "stop 3"]);
    expect(chunks.map(([index, start]) => [index, start])).toEqual([
      [0, 1000],
      [1, 3001],
      [2, 5003],
    ]);
    expect(FakeMediaRecorder.instances).toHaveLength(1);
    expect(recorder.isRecording).toBe(false);
  });

  it("lets go of the microphone on close", async () => {
    const recorder = new ThinkAloudRecorder(fakeEnv());
    await recorder.open();
    expect(recorder.isOpen).toBe(true);
    recorder.close();
    expect(recorder.isOpen).toBe(false);
  });
});

describe("levelFromSamples", () => {
  it("reads silence as 0, a full-scale signal as 1, and speech in between", () => {
    expect(levelFromSamples(new Float32Array(512))).toBe(0);
    expect(levelFromSamples(new Float32Array(512).fill(1))).toBe(1);
    const speech = levelFromSamples(Float32Array.from({ length: 512 }, (_, i) => 0.05 * Math.sin(i / 5)));
    expect(speech).toBeGreaterThan(0.5);
    expect(speech).toBeLessThan(0.9);
  });
});
