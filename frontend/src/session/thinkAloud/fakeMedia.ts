/**
 * Stand-ins for the browser's microphone, for the unit tests only (the e2e test uses Chromium's
 * fake audio device): a MediaRecorder the test drives slice by slice, and getUserMedia.
 */
import type { RecorderEnv } from "./recorder";

export class FakeMediaRecorder {
  static instances: FakeMediaRecorder[] = [];
  static supported = ["audio/webm;codecs=opus"];
  readonly stream: MediaStream;
  readonly options: MediaRecorderOptions | undefined;
  state: "inactive" | "recording" = "inactive";
  timeslice: number | undefined;
  onstart: (() => void) | null = null;
  ondataavailable: ((event: BlobEvent) => void) | null = null;
  onstop: (() => void) | null = null;
  onerror: ((event: Event) => void) | null = null;
  private slices = 0;

  constructor(stream: MediaStream, options?: MediaRecorderOptions) {
    this.stream = stream;
    this.options = options;
    FakeMediaRecorder.instances.push(this);
  }

  static isTypeSupported(type: string): boolean {
    return FakeMediaRecorder.supported.includes(type);
  }

  static reset(): void {
    FakeMediaRecorder.instances = [];
    FakeMediaRecorder.supported = ["audio/webm;codecs=opus"];
  }

  static latest(): FakeMediaRecorder {
    const recorder = FakeMediaRecorder.instances[FakeMediaRecorder.instances.length - 1];
    if (!recorder) throw new Error("No MediaRecorder was made.");
    return recorder;
  }

  start(timeslice?: number): void {
    this.timeslice = timeslice;
    this.state = "recording";
    this.onstart?.();
  }

  /** One timeslice elapsed: hand over a chunk (chunk 0 "carries the header"). */
  emit(text?: string): void {
    const body = text ?? (this.slices === 0 ? "HEADER+audio-0" : `audio-${this.slices}`);
    this.slices += 1;
    this.ondataavailable?.({ data: new Blob([body], { type: "audio/webm;codecs=opus" }) } as BlobEvent);
  }

  stop(): void {
    if (this.state === "inactive") return;
    this.state = "inactive";
    this.emit();
    this.onstop?.();
  }
}

export function fakeStream(): MediaStream & { stopped: boolean } {
  const track = {
    stopped: false,
    stop() {
      this.stopped = true;
    },
    addEventListener() {},
  };
  const stream = {
    stopped: false,
    getTracks: () => [track],
    getAudioTracks: () => [track],
  };
  Object.defineProperty(stream, "stopped", { get: () => track.stopped });
  return stream as unknown as MediaStream & { stopped: boolean };
}

/** A browser with a microphone; `getUserMedia` can be made to fail with a DOMException name. */
export function fakeEnv(options: { failWith?: string; secure?: boolean; recorder?: boolean } = {}): RecorderEnv & {
  requests: number;
} {
  const env = {
    requests: 0,
    mediaDevices: {
      getUserMedia: async () => {
        env.requests += 1;
        if (options.failWith) throw new DOMException("denied by test", options.failWith);
        return fakeStream();
      },
    },
    MediaRecorder: options.recorder === false ? undefined : (FakeMediaRecorder as unknown as RecorderEnv["MediaRecorder"]),
    isSecureContext: options.secure ?? true,
    origin: "http://127.0.0.1:8000",
  };
  return env;
}
