import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import { SESSION_SHORTCUTS, shortcutFor, shortcutLabel } from "../../components/shortcuts";
import type { ClipMeta } from "../../api/audio";
import { browserMsFromPerformance, browserNowMs, type SessionClock } from "./clock";
import {
  browserEnv,
  MicrophoneProblem,
  microphoneProblem,
  type RecorderEnv,
  supportProblem,
  ThinkAloudRecorder,
} from "./recorder";
import { type UploadQueue, uploadQueueFor } from "./uploadQueue";
import { UploadStatus } from "./UploadStatus";

type Phase = "off" | "opening" | "ready" | "recording";
type Mode = "push" | "continuous";

interface MicrophoneControlProps {
  episodeId: number;
  username: string;
  clock: SessionClock;
  /** Injected in tests. */
  env?: RecorderEnv;
  queue?: UploadQueue;
}

const LEVEL_INTERVAL_MS = 80;
const VOICE_SETTING = "loupe.voiceCommands";

function voiceSetting(): boolean {
  try {
    return localStorage.getItem(VOICE_SETTING) === "on";
  } catch {
    return false;
  }
}
/** The push-to-talk key(s), whose release ends the clip. */
const TALK_KEYS = SESSION_SHORTCUTS.find((s) => s.action === "talk")?.keys ?? [];

function formatElapsed(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/**
 * Think aloud: hold the button (or the M key) to talk, or record continuously. Each recording is
 * a clip cut into ~1 s chunks stamped on the session clock; the upload queue sends them as soon as
 * they are ready and keeps them through network drops. Shows the input level, a clear indicator
 * while recording, and how the uploads stand.
 */
export function MicrophoneControl({ episodeId, username, clock, env, queue: injectedQueue }: MicrophoneControlProps) {
  const environment = useMemo(() => env ?? browserEnv(), [env]);
  const recorder = useMemo(() => new ThinkAloudRecorder(environment), [environment]);
  const support = useMemo(() => supportProblem(environment), [environment]);
  const queue = useMemo(() => injectedQueue ?? uploadQueueFor(username), [injectedQueue, username]);
  const clockKnown = useSyncExternalStore(
    useCallback((listener) => clock.subscribe(listener), [clock]),
    () => clock.known,
  );

  const [phase, setPhase] = useState<Phase>("off");
  const [mode, setMode] = useState<Mode | null>(null);
  const [problem, setProblem] = useState<MicrophoneProblem | null>(null);
  const [level, setLevel] = useState(0);
  const [since, setSince] = useState<number | null>(null);
  const [voiceCommands, setVoiceCommands] = useState(voiceSetting);
  const [now, setNow] = useState(() => browserNowMs());
  /** What the person is asking for right now: a push released during the permission prompt starts nothing. */
  const wanted = useRef<Mode | null>(null);

  const sessionSeconds = useCallback(
    (performanceMs: number) => {
      const browserMs = browserMsFromPerformance(performanceMs);
      return clock.sessionSeconds(browserMs) ?? browserMs / 1000;
    },
    [clock],
  );

  const stopClip = useCallback(() => {
    wanted.current = null;
    if (recorder.isRecording) recorder.stop();
    setMode(null);
    setSince(null);
    setPhase(recorder.isOpen ? "ready" : "off");
  }, [recorder]);

  const startClip = useCallback(
    (clipMode: Mode) => {
      const clientId = crypto.randomUUID();
      const contentType = recorder.mimeType ?? "audio/webm;codecs=opus";
      let clip: ClipMeta | null = null;
      const clipAt = (atMs: number): ClipMeta => {
        clip ??= { episodeId, clientId, contentType, startedAt: sessionSeconds(atMs), voiceCommands };
        return clip;
      };
      recorder.start({
        onStart: (atMs) => void clipAt(atMs),
        onChunk: (index, startMs, data) => queue.addChunk(clipAt(startMs), index, sessionSeconds(startMs), data),
        onStop: (chunks) => {
          if (clip && chunks > 0) queue.addFinish(clip);
        },
        onError: (error) => {
          setProblem(error);
          stopClip();
        },
      });
      setMode(clipMode);
      setSince(browserNowMs());
      setPhase("recording");
    },
    [episodeId, queue, recorder, sessionSeconds, stopClip, voiceCommands],
  );

  const begin = useCallback(
    async (clipMode: Mode) => {
      if (!clockKnown || support || recorder.isRecording || wanted.current) return;
      wanted.current = clipMode;
      if (!recorder.isOpen) {
        setPhase("opening");
        try {
          await recorder.open();
        } catch (error) {
          wanted.current = null;
          setProblem(microphoneProblem(error));
          setPhase("off");
          return;
        }
        setPhase("ready");
      }
      setProblem(null);
      if (wanted.current !== clipMode) return; // let go while the browser asked for permission
      startClip(clipMode);
    },
    [clockKnown, support, recorder, startClip],
  );

  /** End a recording of this mode (a push released ends a push, not a continuous recording). */
  const end = useCallback(
    (clipMode: Mode) => {
      if (wanted.current !== clipMode) return;
      stopClip();
    },
    [stopClip],
  );

  // Hold M to talk. The page's shortcut handler leaves "talk" to this control, which also needs the key's release.
  useEffect(() => {
    function onKeyDown(event: KeyboardEvent) {
      if (event.repeat || shortcutFor(event)?.action !== "talk") return;
      event.preventDefault();
      void begin("push");
    }
    function onKeyUp(event: KeyboardEvent) {
      if (TALK_KEYS.includes(event.key.toLowerCase())) end("push");
    }
    const onBlur = () => end("push"); // the key's release may never reach a page that lost focus
    window.addEventListener("keydown", onKeyDown);
    window.addEventListener("keyup", onKeyUp);
    window.addEventListener("blur", onBlur);
    return () => {
      window.removeEventListener("keydown", onKeyDown);
      window.removeEventListener("keyup", onKeyUp);
      window.removeEventListener("blur", onBlur);
    };
  }, [begin, end]);

  // The microphone went away on its own (unplugged, permission revoked).
  useEffect(() => {
    recorder.onEnded = () => {
      setProblem(
        new MicrophoneProblem(
          "no-device",
          "The microphone stopped (unplugged, muted by the system, or access withdrawn). Connect it and press the button again.",
        ),
      );
      wanted.current = null;
      recorder.close();
      setMode(null);
      setSince(null);
      setPhase("off");
    };
    return () => {
      recorder.onEnded = null;
    };
  }, [recorder]);

  // Leaving the page (or losing the right to record: the page then drops this control) ends the
  // clip, whose last chunk still goes to the queue, and frees the microphone.
  useEffect(() => () => recorder.close(), [recorder]);

  const open = phase === "ready" || phase === "recording";
  useEffect(() => {
    if (!open) {
      setLevel(0);
      return;
    }
    const timer = setInterval(() => setLevel(recorder.level()), LEVEL_INTERVAL_MS);
    return () => clearInterval(timer);
  }, [open, recorder]);

  const recording = phase === "recording";
  useEffect(() => {
    if (!recording) return;
    setNow(browserNowMs());
    const timer = setInterval(() => setNow(browserNowMs()), 500); // the recording's elapsed time
    return () => clearInterval(timer);
  }, [recording]);

  const disabledWhy = support?.message || (clockKnown ? "" : "Waiting for the live connection, which tells the server's clock…");
  const holdKey = shortcutLabel("talk");

  return (
    <section
      className={`card mic-control${recording ? " mic-recording" : ""}`}
      data-testid="mic-control"
      data-phase={phase}
      aria-label="Think aloud"
    >
      <div className="section-header">
        <h2>Think aloud</h2>
        <div className="header-spacer" />
        {recording ? (
          <span className="recording-indicator" data-testid="recording-indicator" data-mode={mode ?? ""} role="status">
            <span className="recording-dot" aria-hidden="true" />
            Recording {since !== null ? formatElapsed(now - since) : ""}
            {mode === "continuous" ? " · continuous" : " · release to stop"}
          </span>
        ) : (
          <span className="muted small" data-testid="mic-state">
            {phase === "opening" ? "Asking for the microphone…" : open ? "Microphone on, not recording" : "Microphone off"}
          </span>
        )}
      </div>

      {(problem ?? support) && (
        <div className="banner banner-error mic-problem" role="alert" data-testid="mic-problem" data-kind={(problem ?? support)!.kind}>
          <div className="banner-body">
            <strong>{(problem ?? support)!.kind === "denied" ? "Microphone blocked" : "Microphone unavailable"}</strong>
            <p>{(problem ?? support)!.message}</p>
          </div>
        </div>
      )}

      <div className="mic-buttons">
        <button
          type="button"
          className={`button primary mic-hold${recording && mode === "push" ? " active" : ""}`}
          data-testid="mic-hold"
          disabled={Boolean(disabledWhy) || mode === "continuous"}
          title={disabledWhy || `Hold to talk (or hold ${holdKey})`}
          onPointerDown={(event) => {
            if (event.button !== 0) return;
            event.currentTarget.setPointerCapture?.(event.pointerId);
            void begin("push");
          }}
          onPointerUp={() => end("push")}
          onPointerCancel={() => end("push")}
          onContextMenu={(event) => event.preventDefault()}
        >
          {recording && mode === "push" ? "Recording… release to stop" : "Hold to talk"} <kbd>{holdKey}</kbd>
        </button>
        <button
          type="button"
          className={`button mic-continuous${mode === "continuous" ? " danger" : ""}`}
          data-testid="mic-continuous"
          aria-pressed={mode === "continuous"}
          disabled={Boolean(disabledWhy) || mode === "push"}
          title={disabledWhy || "Record until you press again"}
          onClick={() => (mode === "continuous" ? end("continuous") : void begin("continuous"))}
        >
          {mode === "continuous" ? "Stop recording" : "Record continuously"}
        </button>
        {open && !recording && (
          <button
            type="button"
            className="button subtle small"
            data-testid="mic-off"
            onClick={() => {
              recorder.close();
              setPhase("off");
            }}
          >
            Turn microphone off
          </button>
        )}
      </div>

      <label
        className="voice-toggle small"
        title={
          recording
            ? "Applies from your next recording."
            : "Say approve, reject and a reason, take over, hand back, pause, resume, or finish with an outcome: each is shown for a second (Esc cancels) and then sent. Other speech stays think-aloud."
        }
      >
        <input
          type="checkbox"
          data-testid="voice-commands-toggle"
          checked={voiceCommands}
          onChange={(event) => {
            const on = event.currentTarget.checked;
            setVoiceCommands(on);
            try {
              localStorage.setItem(VOICE_SETTING, on ? "on" : "off");
            } catch {
              // private mode: the setting lasts for this page
            }
          }}
        />{" "}
        Voice commands: say “approve”, “reject, …”, “take over”, “hand back”, “pause”, “resume”, “finish with success”
      </label>

      <div
        className={`level-meter${open ? "" : " level-meter-off"}`}
        role="meter"
        aria-label="Microphone level"
        aria-valuemin={0}
        aria-valuemax={1}
        aria-valuenow={Number(level.toFixed(2))}
        data-testid="mic-level"
        data-level={level.toFixed(2)}
      >
        <div className="level-meter-bar" style={{ width: `${Math.round(level * 100)}%` }} />
      </div>

      {disabledWhy && !support && <p className="muted small">{disabledWhy}</p>}
      {!disabledWhy && phase === "off" && !problem && (
        <p className="muted small">The browser asks for the microphone the first time. Words appear in the transcript below.</p>
      )}
      <UploadStatus queue={queue} />
    </section>
  );
}
