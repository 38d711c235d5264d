import { useState } from "react";
import { ApiError } from "../api/client";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime } from "../components/format";
import type { Judgement } from "../api/judge";
import { useJudgeEpisode, useJudgements } from "./judgeQueries";

function verdictText(judgement: Judgement): string {
  if (!judgement.verdict) return "No verdict";
  return judgement.verdict === "success" ? "Success" : "Failure";
}

/** "2 of 3 samples agreed (67 %)", or what a single rule verdict rests on. */
export function confidenceText(judgement: Judgement): string {
  if (judgement.confidence === null) return "";
  const n = judgement.votes.length;
  const share = `${Math.round(judgement.confidence * 100)} %`;
  if (n > 1) return `${judgement.votes.filter((v) => v.verdict === judgement.verdict).length} of ${n} samples agreed (${share})`;
  return `confidence ${share}`;
}

/**
 * The judge's newest verdict on this episode, beside the person's review: what it said, why, how sure it was,
 * and a button to judge it again (queued on the `default` worker; the panel waits for the answer).
 */
export function JudgePanel({ episodeId, finished }: { episodeId: number; finished: boolean }) {
  const [waitingFor, setWaitingFor] = useState<number | null>(null);
  const judgements = useJudgements(episodeId, waitingFor);
  const judge = useJudgeEpisode(episodeId);
  const list = judgements.data ?? [];
  const latest = list[0];
  const waiting = waitingFor !== null && list.length <= waitingFor;

  // An annotator reviewing from a queue may not read the judge (managers only): the panel is left out.
  if (judgements.error instanceof ApiError && judgements.error.status === 403) return null;
  return (
    <section className="card judge-panel" aria-label="The judge's verdict" data-testid="judge-panel">
      <h2>The judge's verdict</h2>
      {judgements.isError && <ErrorBanner error={judgements.error} title="Could not load the judge's verdicts" />}
      {judgements.isSuccess && !latest && (
        <p className="muted" data-testid="judge-none">
          The judge has not looked at this episode yet.
        </p>
      )}
      {latest && (
        <div data-testid="judge-latest" data-verdict={latest.verdict || "none"}>
          <p>
            <strong className={`judge-verdict judge-${latest.verdict || "none"}`} data-testid="judge-verdict">
              {verdictText(latest)}
            </strong>{" "}
            <span className="muted small" data-testid="judge-confidence">
              {confidenceText(latest)}
            </span>
          </p>
          <p data-testid="judge-reason">
            {latest.verdict ? "Why: " : "Why there is none: "}
            {latest.reason}
          </p>
          <p className="muted small">
            {latest.judge === "rule" ? "Rule judge (no model)" : `${latest.judge} judge${latest.model ? ` · ${latest.model}` : ""}`}
            {" · "}
            {formatDateTime(latest.created_at)}
            {latest.created_by ? ` · asked by ${latest.created_by.username}` : " · after the episode finished"}
          </p>
        </div>
      )}
      {judge.isError && <ErrorBanner error={judge.error} title="Could not ask the judge" />}
      <button
        type="button"
        className="button small"
        disabled={!finished || judge.isPending || waiting}
        title={finished ? "Ask the judge again with the project's judge settings" : "Only finished episodes are judged"}
        data-testid="judge-run"
        onClick={() => {
          setWaitingFor(list.length);
          judge.mutate(undefined, { onError: () => setWaitingFor(null) });
        }}
      >
        {waiting ? "The judge is looking…" : latest ? "Judge again" : "Ask the judge"}
      </button>
    </section>
  );
}
