import { useMemo, useRef, useState } from "react";
import { API_ROOT } from "../api/client";
import { formatDuration, stepNumber } from "../components/format";
import type { AudioClip, ReplayStep, Transcript, TranscriptWord } from "./queries";
import { stepForAudio, wordAtTime } from "./replay";

interface ThinkAloudProps {
  transcript: Transcript | undefined;
  steps: ReplayStep[];
  current: number;
  /** The audio moved into another step's time: show that step. */
  onStep: (index: number) => void;
}

/** Clip seconds up to which the transcript has heard speech: a lower bound of the clip's length. */
function heardUntil(clip: AudioClip, words: TranscriptWord[]): number {
  const ends = words.filter((w) => w.clip === clip.id).map((w) => w.end - clip.origin);
  return Math.max(0, clip.committed_until || 0, ...ends);
}

function clipTitle(clip: AudioClip, words: TranscriptWord[]): string {
  const who = words.find((w) => w.clip === clip.id)?.username;
  return who ? `${who}'s recording` : `Recording ${clip.id}`;
}

/** How far the player is in learning a clip's length (see ClipPlayer). */
type Probe = "idle" | "to-end" | "rewinding";

/**
 * One clip's player and its length. MediaRecorder's WebM carries no duration, so Chromium reports
 * `Infinity` until it has read to the end (and its own controls cannot show a length or seek well):
 * the player seeks far past the end once, which makes the browser find the real length, then goes
 * back to the start. While it probes, its time updates are not the person's playing and move no
 * step. Until the length is known, the transcript's last word gives a lower bound.
 */
function ClipPlayer({
  clip,
  heardUntil,
  register,
  onPlay,
  onTime,
}: {
  clip: AudioClip;
  /** Clip seconds up to which speech is known (the last word's end); 0 when none. */
  heardUntil: number;
  register: (element: HTMLAudioElement | null) => void;
  onPlay: () => void;
  onTime: (element: HTMLAudioElement) => void;
}) {
  const probe = useRef<Probe>("idle");
  const [duration, setDuration] = useState<number | null>(null);

  function learnt(element: HTMLAudioElement): boolean {
    if (!Number.isFinite(element.duration)) return false;
    setDuration(element.duration);
    return true;
  }
  function onProbeProgress(element: HTMLAudioElement) {
    if (probe.current === "to-end" && learnt(element)) {
      probe.current = "rewinding";
      element.currentTime = 0;
    }
  }

  const length = duration !== null ? formatDuration(duration) : heardUntil > 0 ? `at least ${formatDuration(heardUntil)}` : "—";
  return (
    <div className="replay-clip">
      <audio
        controls
        preload="metadata"
        src={`${API_ROOT}/audio/${clip.id}/file`}
        data-testid="replay-audio"
        data-clip={clip.id}
        ref={register}
        onLoadedMetadata={(e) => {
          const element = e.currentTarget;
          if (learnt(element)) return;
          probe.current = "to-end";
          element.currentTime = Number.MAX_SAFE_INTEGER; // the browser reads to the end and learns the length
        }}
        onDurationChange={(e) => {
          if (probe.current === "idle") learnt(e.currentTarget);
          else onProbeProgress(e.currentTarget);
        }}
        onPlay={() => {
          probe.current = "idle"; // the person pressed play: their time counts from here
          onPlay();
        }}
        onTimeUpdate={(e) => {
          if (probe.current === "idle") onTime(e.currentTarget);
          else onProbeProgress(e.currentTarget);
        }}
        onSeeked={(e) => {
          const element = e.currentTarget;
          if (probe.current === "to-end") return onProbeProgress(element);
          if (probe.current === "rewinding") {
            probe.current = "idle";
            return;
          }
          onTime(element);
        }}
      />
      <span className="muted small replay-clip-length" data-testid="clip-duration" data-known={duration !== null}>
        {length}
      </span>
    </div>
  );
}

/**
 * The episode's think-aloud: a player a clip, and the transcript with the word being said
 * highlighted as it plays. The step view follows the audio: when the playing time enters
 * another step (the spoken word's step, or the step window it falls in), that step is shown;
 * stepping by hand in between is left alone until the audio crosses the next boundary or is
 * played again.
 */
export function ThinkAloud({ transcript, steps, current, onStep }: ThinkAloudProps) {
  const players = useRef(new Map<number, HTMLAudioElement>());
  const lastStep = useRef<number | null>(null);
  const [playing, setPlaying] = useState<{ clip: number; time: number } | null>(null);
  const words = useMemo(() => transcript?.words ?? [], [transcript]);
  const clips = transcript?.clips ?? [];

  const byStep = useMemo(() => {
    const groups: { step: number | null; words: { word: TranscriptWord; at: number }[] }[] = [];
    words.forEach((word, at) => {
      const last = groups[groups.length - 1];
      if (last && last.step === word.step) last.words.push({ word, at });
      else groups.push({ step: word.step, words: [{ word, at }] });
    });
    return groups;
  }, [words]);

  const active = useMemo(() => {
    if (!playing) return -1;
    const own = words.map((w, at) => ({ ...w, at })).filter((w) => w.clip === playing.clip);
    const i = wordAtTime(own, playing.time);
    return i >= 0 ? own[i].at : -1;
  }, [playing, words]);

  function follow(clip: AudioClip, element: HTMLAudioElement) {
    const time = clip.origin + element.currentTime;
    setPlaying({ clip: clip.id, time });
    const step = stepForAudio(words.filter((w) => w.clip === clip.id), steps, time);
    if (step !== null && step !== lastStep.current) {
      lastStep.current = step;
      onStep(step);
    }
  }

  function seek(word: TranscriptWord) {
    const clip = clips.find((c) => c.id === word.clip);
    const element = players.current.get(word.clip);
    if (word.step !== null) {
      lastStep.current = word.step;
      onStep(word.step);
    }
    if (clip && element) element.currentTime = Math.max(0, word.start - clip.origin);
  }

  if (!transcript) return null;
  if (clips.length === 0) {
    return (
      <section className="card think-aloud" aria-label="Think-aloud" data-testid="think-aloud">
        <h2>Think-aloud</h2>
        <p className="muted">Nobody recorded think-aloud audio in this episode.</p>
      </section>
    );
  }
  const transcribing = clips.some((c) => c.transcribed_chunks < c.chunks);
  return (
    <section className="card think-aloud" aria-label="Think-aloud" data-testid="think-aloud">
      <div className="section-header">
        <h2>Think-aloud</h2>
        <span className="muted small">The step view follows the audio as it plays; click a word to jump there.</span>
      </div>
      {clips.map((clip) => (
        <div key={clip.id}>
          <div className="muted small">{clipTitle(clip, words)}</div>
          <ClipPlayer
            clip={clip}
            heardUntil={heardUntil(clip, words)}
            register={(element) => {
              if (element) players.current.set(clip.id, element);
              else players.current.delete(clip.id);
            }}
            onPlay={() => {
              lastStep.current = null; // pressing play brings the step view to where the audio is
            }}
            onTime={(element) => follow(clip, element)}
          />
        </div>
      ))}
      {words.length === 0 ? (
        <p className="muted">{transcribing ? "Still transcribing: the words appear here when the audio worker is done." : "No words were recognised in the recording."}</p>
      ) : (
        <div className="replay-transcript" data-testid="transcript">
          {byStep.map((group, g) => (
            <p key={g} className={group.step === current ? "replay-transcript-group current" : "replay-transcript-group"}>
              <button
                type="button"
                className="replay-transcript-step"
                onClick={() => group.step !== null && onStep(group.step)}
                disabled={group.step === null}
              >
                {group.step === null ? "—" : `step ${stepNumber(group.step)}`}
              </button>
              {group.words.map(({ word, at }) => (
                <span
                  key={at}
                  role="button"
                  tabIndex={-1}
                  className={at === active ? "replay-word active" : "replay-word"}
                  data-testid="transcript-word"
                  data-active={at === active ? "true" : undefined}
                  title={`${word.username} at step ${word.step === null ? "?" : stepNumber(word.step)}`}
                  onClick={() => seek(word)}
                >
                  {word.word.trim()}{" "}
                </span>
              ))}
            </p>
          ))}
        </div>
      )}
    </section>
  );
}
