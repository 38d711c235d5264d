import { useState } from "react";
import { stepNumber } from "../components/format";
import type { Proposal } from "./episodeState";

/** "Proposal 2 for this step, after your reject" / "... after ann's rejects". */
export function attemptLine(proposal: Proposal, me: string | null): string {
  const people = [...new Set(proposal.rejected.map((r) => r.rejected_by ?? "someone"))];
  const whose = people.length === 1 && people[0] === me ? "your" : `${people.map((p) => (p === me ? "your" : `${p}'s`)).join(" and ")}`;
  const rejects = proposal.rejected.length === 1 ? "reject" : "rejects";
  return `Proposal ${proposal.attempt} for this step, after ${whose} ${rejects}`;
}

/** The open proposal: what the model thinks and wants to do, waiting for the controller. */
export function ProposalPanel({
  proposal,
  deciding,
  humanControl = false,
  onAnswer,
  me = null,
  ask = "",
}: {
  /** Why the model waits for a person (the episode's ask, "confidence 0.31 < 0.5"); "" when it does not. */
  ask?: string;
  proposal: Proposal;
  deciding: boolean;
  /** Who is looking (their own rejects read "your"). */
  me?: string | null;
  /** A person took over: the proposal stays for reference, but nobody decides it. */
  humanControl?: boolean;
  /** Approve the model's call_user with the person's reply; absent for people who only watch. */
  onAnswer?: (answer: string) => void;
}) {
  const question = proposal.action?.name === "call_user" ? String(proposal.action.args.question ?? "") : "";
  const [answer, setAnswer] = useState("");
  return (
    <section
      className="card proposal"
      aria-label="Proposed step"
      data-testid="proposal"
      data-index={proposal.index ?? ""}
      data-attempt={proposal.attempt}
    >
      <div className="section-header">
        <h2>
          {proposal.index === null
            ? humanControl
              ? "What the model would do now"
              : "Proposed step"
            : humanControl
              ? `What the model would do at step ${stepNumber(proposal.index)}`
              : `Proposed step ${stepNumber(proposal.index)}`}
        </h2>
        <span className="badge status-paused">
          {humanControl ? "a person acts instead" : deciding ? "decision sent…" : "awaiting decision"}
        </span>
        {proposal.void_reason && <span className="badge void">void turn</span>}
        {proposal.confidence !== null && (
          <span
            className={proposal.reason === "unsure" ? "badge void" : "badge"}
            data-testid="proposal-confidence"
            title="How sure the model was of this action: the average probability of its action's tokens"
          >
            confidence {proposal.confidence.toFixed(2)}
          </span>
        )}
      </div>
      {proposal.reason === "unsure" && !humanControl && (
        <div className="call-user" role="alert" data-testid="proposal-unsure">
          <strong>The model is unsure of this step{ask ? ` (${ask})` : ""} and waits for you.</strong>
          <p className="small">Approve it, edit it or take over. Once this step is decided the episode runs on by itself.</p>
        </div>
      )}
      {proposal.attempt > 1 && (
        <div className="proposal-attempt" data-testid="proposal-attempt" role="status">
          <strong>{attemptLine(proposal, me)}.</strong>
          {proposal.repeated ? (
            <p className="field-error" data-testid="proposal-repeated">
              The model proposed the same step again, even asked to try something else. Edit it, take over, or reject it
              with a reason that says what to do instead.
            </p>
          ) : (
            <p className="muted small">The model was told what you rejected and why, and proposed this instead.</p>
          )}
          <ul className="rejected-list" data-testid="proposal-rejected">
            {proposal.rejected.map((rejection) => (
              <li key={rejection.attempt}>
                <span className="mono strike">{rejection.action_text || "(not an action)"}</span>
                {rejection.reason ? <span className="muted"> — “{rejection.reason}”</span> : null}
              </li>
            ))}
          </ul>
        </div>
      )}
      {question && (
        <div className="call-user" role="alert" data-testid="call-user">
          <strong>The agent asks you:</strong>
          <p>{question}</p>
          {onAnswer && !humanControl ? (
            <form
              className="call-user-answer"
              onSubmit={(event) => {
                event.preventDefault();
                if (answer.trim()) onAnswer(answer.trim());
              }}
            >
              <label htmlFor="call-user-answer">Your answer (the model reads it in its next turn)</label>
              <textarea
                id="call-user-answer"
                data-testid="call-user-answer"
                rows={2}
                maxLength={4000}
                value={answer}
                onChange={(event) => setAnswer(event.target.value)}
              />
              <button type="submit" className="button primary" data-testid="call-user-send" disabled={!answer.trim() || deciding}>
                Answer and continue
              </button>
              <span className="muted small">Or edit the step, take over, or finish the episode.</span>
            </form>
          ) : (
            <span className="muted small">Whoever controls the episode answers, edits the step or takes over.</span>
          )}
        </div>
      )}
      <h3>Thought</h3>
      <p className="thought">{proposal.thought || <span className="muted">No thought.</span>}</p>
      <h3>Action</h3>
      <pre className="action" data-testid="proposal-action">
        {proposal.action_text || "(none)"}
      </pre>
      {proposal.void_reason && (
        <>
          <p className="field-error" data-testid="proposal-void">
            The model's output did not parse: {proposal.void_reason}
          </p>
          {proposal.raw && (
            <details>
              <summary>What the model wrote</summary>
              <pre className="action">{proposal.raw}</pre>
            </details>
          )}
        </>
      )}
    </section>
  );
}
