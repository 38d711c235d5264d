/**
 * The microphone: one live stream (getUserMedia), a level meter on it (an AudioContext analyser),
 * and clips recorded from it with MediaRecorder.
 *
 * A clip is ONE MediaRecorder run with a 1 s timeslice (words reach the screen sooner: issue 22), so its chunks are what the server expects
 * (annotation/speech.py, annotation/audio.py): chunk 0 carries the WebM header and every later
 * chunk is continuation bytes, cut wherever the muxer stood when the timeslice fired (even inside
 * a block); the server stores each one and transcribes the concatenation of chunks 0..N. Stopping and restarting the recorder every second
 * would instead make each piece a separate stream with its own header, which the concatenation
 * cannot decode. Each press of push-to-talk, or each continuous stretch, is a new clip.
 */

export const TIMESLICE_MS = 1000;

/** Opus in WebM (Chrome, Edge) or Ogg (Firefox): the types the server accepts from a recorder. */
export const MIME_TYPES = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus"];

export type MicrophoneProblemKind = "denied" | "no-device" | "busy" | "insecure" | "unsupported" | "failed";

/** Why the microphone cannot be used, in words that say what to do about it. */
export class MicrophoneProblem extends Error {
  readonly kind: MicrophoneProblemKind;

  constructor(kind: MicrophoneProblemKind, message: string) {
    super(message);
    this.name = "MicrophoneProblem";
    this.kind = kind;
  }
}

/** What the recorder needs from the browser; the unit tests pass fakes. */
export interface RecorderEnv {
  mediaDevices?: Pick<MediaDevices, "getUserMedia">;
  MediaRecorder?: {
    new (stream: MediaStream, options?: MediaRecorderOptions): MediaRecorder;
    isTypeSupported(type: string): boolean;
  };
  AudioContext?: new () => AudioContext;
  isSecureContext: boolean;
  origin: string;
}

export function browserEnv(): RecorderEnv {
  const w = typeof window === "undefined" ? undefined : window;
  const AudioContextClass = w?.AudioContext ?? (w as unknown as { webkitAudioContext?: new () => AudioContext })?.webkitAudioContext;
  return {
    mediaDevices: typeof navigator !== "undefined" ? navigator.mediaDevices : undefined,
    MediaRecorder: typeof MediaRecorder === "undefined" ? undefined : MediaRecorder,
    AudioContext: AudioContextClass,
    isSecureContext: w?.isSecureContext ?? false,
    origin: w?.location.origin ?? "",
  };
}

/** The recorder type to use, or null if the browser can record none the server accepts. */
export function pickMimeType(env: RecorderEnv): string | null {
  const recorder = env.MediaRecorder;
  if (!recorder) return null;
  return MIME_TYPES.find((type) => recorder.isTypeSupported(type)) ?? null;
}

/** Null when this browser, on this page, can record; else why not. */
export function supportProblem(env: RecorderEnv): MicrophoneProblem | null {
  if (!env.mediaDevices?.getUserMedia) {
    if (!env.isSecureContext) {
      return new MicrophoneProblem(
        "insecure",
        `Browsers only allow the microphone on secure pages, and ${env.origin || "this page"} is not one. ` +
          "Open Loupe over https://, or at http://localhost on the server's own machine.",
      );
    }
    return new MicrophoneProblem(
      "unsupported",
      "This browser cannot use a microphone here. Use a current Chrome, Edge or Firefox.",
    );
  }
  if (!env.MediaRecorder) {
    return new MicrophoneProblem(
      "unsupported",
      "This browser cannot record audio (it has no MediaRecorder). Use a current Chrome, Edge or Firefox.",
    );
  }
  if (!pickMimeType(env)) {
    return new MicrophoneProblem(
      "unsupported",
      "This browser cannot record Opus audio (WebM or Ogg), which the server transcribes. Use Chrome, Edge or Firefox.",
    );
  }
  return null;
}

/** Turn what getUserMedia threw into a message that says what happened and what to do. */
export function microphoneProblem(error: unknown): MicrophoneProblem {
  if (error instanceof MicrophoneProblem) return error;
  const name = error instanceof Error || error instanceof DOMException ? error.name : "";
  switch (name) {
    case "NotAllowedError":
    case "PermissionDeniedError":
    case "SecurityError":
      return new MicrophoneProblem(
        "denied",
        "Microphone access is blocked for this site. Click the padlock or microphone icon in the address bar, " +
          "set Microphone to Allow, then press the microphone button again. (If your system blocks the browser " +
          "from the microphone, allow it in the system's privacy settings too.)",
      );
    case "NotFoundError":
    case "DevicesNotFoundError":
    case "OverconstrainedError":
      return new MicrophoneProblem(
        "no-device",
        "No microphone was found. Plug one in (or turn it on in your system's sound settings), then try again.",
      );
    case "NotReadableError":
    case "TrackStartError":
    case "AbortError":
      return new MicrophoneProblem(
        "busy",
        "The microphone could not be started: another application may be using it. Close that application, then try again.",
      );
    default: {
      const detail = error instanceof Error && error.message ? ` (${error.message})` : "";
      return new MicrophoneProblem("failed", `The microphone could not be opened${detail}. Reload the page and try again.`);
    }
  }
}

export interface ClipHandlers {
  /** Recording began at `atMs` (performance.now() ms): the clip's first sample. */
  onStart: (atMs: number) => void;
  /** A chunk is ready; `startMs` is where it begins (performance.now() ms). */
  onChunk: (index: number, startMs: number, data: Blob) => void;
  /** The last chunk has been handed over; `chunks` is how many there were. */
  onStop: (chunks: number) => void;
  /** The recorder failed mid-clip (device unplugged...). */
  onError?: (problem: MicrophoneProblem) => void;
}

/** Level in 0..1 from time-domain samples: RMS on a 60 dB scale, so speech moves it and silence does not. */
export function levelFromSamples(samples: Float32Array): number {
  if (samples.length === 0) return 0;
  let sum = 0;
  for (const value of samples) sum += value * value;
  const rms = Math.sqrt(sum / samples.length);
  if (rms <= 0) return 0;
  const db = 20 * Math.log10(rms);
  return Math.min(1, Math.max(0, (db + 60) / 60));
}

export class ThinkAloudRecorder {
  private readonly env: RecorderEnv;
  private stream: MediaStream | null = null;
  private context: AudioContext | null = null;
  private analyser: AnalyserNode | null = null;
  private samples: Float32Array<ArrayBuffer> | null = null;
  private recorder: MediaRecorder | null = null;
  readonly mimeType: string | null;
  /** Called when the microphone goes away on its own (unplugged, permission revoked). */
  onEnded: (() => void) | null = null;

  constructor(env: RecorderEnv = browserEnv()) {
    this.env = env;
    this.mimeType = pickMimeType(env);
  }

  get isOpen(): boolean {
    return this.stream !== null;
  }

  get isRecording(): boolean {
    return this.recorder !== null;
  }

  /** Ask for the microphone (the browser's permission prompt, the first time). Throws MicrophoneProblem. */
  async open(): Promise<void> {
    if (this.stream) return;
    const unsupported = supportProblem(this.env);
    if (unsupported) throw unsupported;
    let stream: MediaStream;
    try {
      // Whisper is trained on unprocessed speech; the browser's call-tuned noise suppression and
      // gain control clip and swallow word onsets (in Chromium they turned "The button" into "But
      // what"). Echo cancellation stays, for an annotator whose speakers play something.
      stream = await this.env.mediaDevices!.getUserMedia({
        audio: { echoCancellation: true, noiseSuppression: false, autoGainControl: false, channelCount: 1 },
      });
    } catch (error) {
      throw microphoneProblem(error);
    }
    this.stream = stream;
    for (const track of stream.getAudioTracks()) {
      track.addEventListener("ended", () => {
        if (this.stream === stream) this.onEnded?.();
      });
    }
    if (this.env.AudioContext) {
      try {
        const context = new this.env.AudioContext();
        const analyser = context.createAnalyser();
        analyser.fftSize = 1024;
        context.createMediaStreamSource(stream).connect(analyser);
        void context.resume?.();
        this.context = context;
        this.analyser = analyser;
        this.samples = new Float32Array(analyser.fftSize);
      } catch {
        // The meter is a help, not a need: record without it.
      }
    }
  }

  /** The input level now, 0..1 (0 without a meter). */
  level(): number {
    if (!this.analyser || !this.samples) return 0;
    this.analyser.getFloatTimeDomainData(this.samples);
    return levelFromSamples(this.samples);
  }

  /** Start a clip on the open stream; chunks arrive every TIMESLICE_MS and once more on stop. */
  start(handlers: ClipHandlers, timesliceMs = TIMESLICE_MS): void {
    if (!this.stream || !this.env.MediaRecorder || !this.mimeType) throw new Error("Open the microphone first.");
    if (this.recorder) return;
    const recorder = new this.env.MediaRecorder(this.stream, { mimeType: this.mimeType, audioBitsPerSecond: 32_000 });
    let index = 0;
    let sliceStart = performance.now();
    recorder.onstart = () => {
      sliceStart = performance.now();
      handlers.onStart(sliceStart);
    };
    recorder.ondataavailable = (event: BlobEvent) => {
      // An empty slice hands its audio to the next one, which so starts where this one did.
      if (!event.data || event.data.size === 0) return;
      const endedAt = performance.now();
      handlers.onChunk(index, sliceStart, event.data);
      index += 1;
      sliceStart = endedAt;
    };
    recorder.onstop = () => handlers.onStop(index);
    recorder.onerror = (event: Event) => {
      const error = (event as Event & { error?: unknown }).error;
      handlers.onError?.(microphoneProblem(error ?? new Error("the recorder stopped")));
    };
    this.recorder = recorder;
    recorder.start(timesliceMs);
  }

  /** End the clip: the recorder hands over its last chunk, then calls onStop. */
  stop(): void {
    const recorder = this.recorder;
    this.recorder = null;
    if (recorder && recorder.state !== "inactive") recorder.stop();
  }

  /** Stop any clip and let go of the microphone (the browser's recording light goes out). */
  close(): void {
    this.stop();
    const stream = this.stream;
    this.stream = null;
    for (const track of stream?.getTracks() ?? []) track.stop();
    void this.context?.close().catch(() => undefined);
    this.context = null;
    this.analyser = null;
    this.samples = null;
  }
}
