import { useQuery } from "@tanstack/react-query";
import { useEffect, useMemo, useRef } from "react";
import type { Step } from "../../api/episodes";
import type { ConnectionState } from "../../api/ws";
import { ErrorBanner } from "../../components/ErrorBanner";
import type { InterimWords } from "../episodeState";
import { audioKeys, transcriptGet } from "../../api/audio";
import { groupByStep, type LiveWord, mergeWords, wordsText } from "./transcript";
import { stepNumber } from "../../components/format";

interface TranscriptPanelProps {
  episodeId: number;
  steps: Step[];
  /** Words from the socket's `transcript.words` events (replayed on every connect). */
  liveWords: LiveWord[];
  connection: ConnectionState;
  /** Provisional words of speech still going on (`transcript.interim`), one entry a clip. */
  interim?: InterimWords[];
}

/**
 * What people said while thinking aloud, grouped by the step they said it in, live. The stored
 * transcript is read on load and again whenever the socket (re)opens or a step executes, since
 * the server re-attaches words to steps as they execute.
 */
export function TranscriptPanel({ episodeId, steps, liveWords, connection, interim = [] }: TranscriptPanelProps) {
  const stored = useQuery({
    queryKey: audioKeys.transcript(episodeId),
    queryFn: ({ signal }) => transcriptGet(episodeId, signal),
    staleTime: 0,
  });
  const { refetch } = stored;
  useEffect(() => {
    if (connection === "open") void refetch();
  }, [connection, steps.length, refetch]);

  const words = useMemo(() => mergeWords(stored.data?.words ?? [], liveWords), [stored.data, liveWords]);
  const groups = useMemo(() => groupByStep(words), [words]);
  const byIndex = useMemo(() => new Map(steps.map((s) => [s.index, s])), [steps]);

  const list = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = list.current;
    if (element) element.scrollTop = element.scrollHeight; // follow the newest words
  }, [words.length, interim]);
  const speaking = interim.filter((entry) => entry.words.length > 0);

  return (
    <section className="card transcript-panel" data-testid="transcript-panel" aria-label="Think-aloud transcript">
      <div className="section-header">
        <h2>Think-aloud transcript</h2>
        <div className="header-spacer" />
        <span className="muted small" data-testid="transcript-count">
          {words.length} word{words.length === 1 ? "" : "s"}
        </span>
      </div>
      {stored.isError && !stored.data && (
        <ErrorBanner error={stored.error} title="Could not load the transcript" onRetry={() => void refetch()} />
      )}
      {groups.length === 0 && speaking.length === 0 && !stored.isError && (
        <p className="muted" data-testid="transcript-empty">
          {stored.isPending
            ? "Loading the transcript…"
            : "Nothing said yet. Words spoken into the microphone appear here within a few seconds, under the step they belong to."}
        </p>
      )}
      {(groups.length > 0 || speaking.length > 0) && (
        <div className="transcript-steps" ref={list}>
          {groups.map((group) => {
            const step = group.step === null ? undefined : byIndex.get(group.step);
            return (
              <div
                key={group.step ?? "none"}
                className="transcript-step"
                data-testid="transcript-step"
                data-step={group.step ?? ""}
              >
                <div className="transcript-step-head">
                  <strong>{group.step === null ? "Not yet on a step" : `Step ${stepNumber(group.step)}`}</strong>
                  {step ? (
                    <span className="mono small muted">{step.action_text || step.actor}</span>
                  ) : (
                    group.step !== null && <span className="small muted">in progress</span>
                  )}
                </div>
                <p className="transcript-words" data-testid="transcript-words">
                  {wordsText(group.words)}
                </p>
              </div>
            );
          })}
          {speaking.map((entry) => (
            <p key={entry.clip} className="transcript-interim" data-testid="transcript-interim" title="Still being spoken: a first reading, replaced by the final words in a moment">
              <span className="small muted">{entry.username ? `${entry.username}, speaking: ` : "Speaking: "}</span>
              {wordsText(entry.words.map((w) => ({ ...w, step: null })))}
            </p>
          ))}
        </div>
      )}
    </section>
  );
}
