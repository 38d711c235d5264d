import { useMemo, useRef, useState } from "react";
import { type AudioClip, clipFileUrl, type Transcript, type TranscriptWord } from "../api/audio";
import { formatDuration, stepNumber } from "../components/format";
import { useClipLength } from "./clipLength";
import type { ReplayStep } from "../api/review";
import type { StepPolishFields } from "../api/polish";
import { PolishProgressLine } from "./PolishedThought";
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

/**
 * One clip's player and its length beside it: the browser's own when it knows it, else learnt by
 * useClipLength, and until then the transcript's last word as a lower bound. Never Infinity or NaN.
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
  const src = clipFileUrl(clip.id);
  const [reported, setReported] = useState<number | null>(null);
  const duration = useClipLength(src, reported);
  const length = duration !== null ? formatDuration(duration) : heardUntil > 0 ? `at least ${formatDuration(heardUntil)}` : "—";
  return (
    <div className="replay-clip">
      <audio
        controls
        preload="metadata"
        src={src}
        data-testid="replay-audio"
        data-clip={clip.id}
        ref={register}
        onDurationChange={(e) => setReported(e.currentTarget.duration)}
        onPlay={onPlay}
        onTimeUpdate={(e) => onTime(e.currentTarget)}
        onSeeked={(e) => onTime(e.currentTarget)}
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
      <PolishProgressLine episodeId={(steps[0] as (ReplayStep & StepPolishFields) | undefined)?.episode} />
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
