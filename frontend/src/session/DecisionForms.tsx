import { type FormEvent, type KeyboardEvent, useEffect, useRef, useState } from "react";
import type { EpisodeOutcome } from "../api/episodes";
import { stepNumber } from "../components/format";
import type { Proposal } from "./episodeState";
import { checkAction, outsideScreen } from "../components/grammar";
import { LimitCounter } from "../components/LimitCounter";
import { isOverLimit } from "../components/limits";

/** Ctrl+Enter (or Cmd+Enter) submits a form from any of its fields. */
function submitOnCtrlEnter(event: KeyboardEvent<HTMLElement>, submit: () => void) {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    submit();
  }
}

/** What is wrong with the typed action, checked as the person types; null when it will be accepted. */
export function editError(text: string, width: number, height: number): string | null {
  const parsed = checkAction(text);
  if (!parsed.ok) return parsed.error;
  return outsideScreen(parsed.action, width, height);
}

/** Whitespace-insensitive: a thought re-wrapped is the same thought. */
const same = (a: string, b: string) => a.split(/\s+/).join(" ").trim() === b.split(/\s+/).join(" ").trim();

/**
 * Why the edit's thought cannot go as it is: the action was changed while the thought is still the model's, which
 * would pass the model's reasoning off as the person's (it becomes the "chosen" side of a preference pair).
 */
export function thoughtProblem(proposal: Pick<Proposal, "thought" | "action_text">, thought: string, action: string): string | null {
  const actionChanged = !same(action, proposal.action_text);
  if (actionChanged && thought.trim() && same(thought, proposal.thought)) {
    return "This is still the model's thought, but your action is different. Say why your action is right, or clear the thought to keep none.";
  }
  return null;
}

/** Edit the proposal: change the thought and/or the action; the action is grammar-checked live. */
export function EditForm({
  proposal,
  onSubmit,
  onCancel,
}: {
  proposal: Proposal;
  onSubmit: (edit: { thought: string; action: string }) => void;
  onCancel: () => void;
}) {
  const [thought, setThought] = useState(proposal.thought);
  const [action, setAction] = useState(proposal.action_text);
  const actionRef = useRef<HTMLInputElement>(null);
  const error = editError(action, proposal.width, proposal.height);
  const thoughtError = thoughtProblem(proposal, thought, action);
  const blocked = Boolean(error) || Boolean(thoughtError) || isOverLimit("human_thought", thought);

  useEffect(() => actionRef.current?.focus(), []);

  function submit(event?: FormEvent) {
    event?.preventDefault();
    const parsed = checkAction(action);
    if (blocked || !parsed.ok) return;
    onSubmit({ thought: thought.trim(), action: parsed.text });
  }

  return (
    <form className="card decision-form" aria-label="Edit the proposal" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>{proposal.index === null ? "Edit the step" : `Edit step ${stepNumber(proposal.index)}`}</h2>
      <div className="field">
        <label htmlFor="edit-thought">Thought (the model's, until you change it)</label>
        <textarea
          id="edit-thought"
          data-testid="edit-thought"
          rows={3}
          value={thought}
          aria-invalid={thoughtError ? true : undefined}
          aria-describedby="edit-thought-help"
          onChange={(e) => setThought(e.target.value)}
        />
        <span id="edit-thought-help">
          {thoughtError && (
            <span className="field-error" data-testid="edit-thought-error" role="status">
              {thoughtError}{" "}
              <button type="button" className="button subtle small" data-testid="edit-thought-clear" onClick={() => setThought("")}>
                Clear the thought
              </button>
            </span>
          )}
          <LimitCounter kind="human_thought" value={thought} />
        </span>
      </div>
      <label className="field">
        <span>Action</span>
        <input
          ref={actionRef}
          data-testid="edit-action"
          className="mono"
          value={action}
          spellCheck={false}
          autoComplete="off"
          placeholder="click(x=120, y=48)"
          aria-invalid={Boolean(error)}
          aria-describedby="edit-action-help"
          onChange={(e) => setAction(e.target.value)}
        />
        {error ? (
          <span className="field-error" data-testid="edit-error" id="edit-action-help" role="status">
            {error}
          </span>
        ) : (
          <span className="muted small" id="edit-action-help">
            Looks right. Coordinates are screenshot pixels ({proposal.width || "?"}×{proposal.height || "?"}).
          </span>
        )}
      </label>
      <div className="form-actions">
        <button type="submit" className="button primary" data-testid="edit-submit" disabled={blocked} title={error ?? thoughtError ?? "Submit (Ctrl+Enter)"}>
          Submit edit <kbd aria-hidden="true">Ctrl+Enter</kbd>
        </button>
        <button type="button" className="button subtle" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** Reject the proposal; the model hears the reason and proposes again for the same step. */
export function RejectForm({
  proposal,
  onSubmit,
  onCancel,
}: {
  proposal: Proposal;
  onSubmit: (reason: string) => void;
  onCancel: () => void;
}) {
  const [reason, setReason] = useState("");
  const ref = useRef<HTMLInputElement>(null);
  useEffect(() => ref.current?.focus(), []);
  const tooLong = isOverLimit("reject_reason", reason);
  function submit(event?: FormEvent) {
    event?.preventDefault();
    if (tooLong) return;
    onSubmit(reason.trim());
  }
  return (
    <form className="card decision-form" aria-label="Reject the proposal" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>{proposal.index === null ? "Reject the step" : `Reject step ${stepNumber(proposal.index)}`}</h2>
      <label className="field">
        <span>Reason (optional; the model reads it)</span>
        <input ref={ref} data-testid="reject-reason" value={reason} aria-describedby="reject-reason-limit" onChange={(e) => setReason(e.target.value)} />
        <LimitCounter kind="reject_reason" value={reason} id="reject-reason-limit" />
      </label>
      <div className="form-actions">
        <button type="submit" className="button danger" data-testid="reject-submit" disabled={tooLong}>
          Reject
        </button>
        <button type="button" className="button subtle" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

const OUTCOMES: { value: Exclude<EpisodeOutcome, "">; label: string }[] = [
  { value: "success", label: "success — the task was done" },
  { value: "failure", label: "failure — the task was not done" },
  { value: "infeasible", label: "infeasible — the task cannot be done" },
];

/** End the episode with the person's verdict. */
export function FinishForm({
  onSubmit,
  onCancel,
}: {
  onSubmit: (finish: { outcome: Exclude<EpisodeOutcome, "">; comment: string }) => void;
  onCancel: () => void;
}) {
  // No outcome is chosen for the person: a default would be submitted by a hurried Enter.
  const [outcome, setOutcome] = useState<EpisodeOutcome>("");
  const [comment, setComment] = useState("");
  const [asked, setAsked] = useState(false);
  const ref = useRef<HTMLSelectElement>(null);
  useEffect(() => ref.current?.focus(), []);
  const tooLong = isOverLimit("finish_comment", comment);
  function submit(event?: FormEvent) {
    event?.preventDefault();
    if (!outcome) {
      setAsked(true);
      ref.current?.focus();
      return;
    }
    if (tooLong) return;
    onSubmit({ outcome, comment: comment.trim() });
  }
  return (
    <form className="card decision-form" aria-label="Finish the episode" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>Finish the episode</h2>
      <label className="field">
        <span>Outcome</span>
        <select
          ref={ref}
          data-testid="finish-outcome"
          value={outcome}
          aria-required="true"
          aria-invalid={asked && !outcome ? true : undefined}
          aria-describedby="finish-outcome-help"
          onChange={(e) => setOutcome(e.target.value as EpisodeOutcome)}
        >
          <option value="" disabled>
            Choose the outcome…
          </option>
          {OUTCOMES.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
        {asked && !outcome ? (
          <span className="field-error" id="finish-outcome-help" data-testid="finish-outcome-error" role="status">
            Choose how the episode ended first.
          </span>
        ) : (
          <span className="muted small" id="finish-outcome-help">
            The task's own check also scores the screen as it is now; if it disagrees, the episode goes to review.
          </span>
        )}
      </label>
      <label className="field">
        <span>Comment (optional; kept with the episode and shown on its replay)</span>
        <textarea data-testid="finish-comment" rows={2} value={comment} aria-describedby="finish-comment-limit" onChange={(e) => setComment(e.target.value)} />
        <LimitCounter kind="finish_comment" value={comment} id="finish-comment-limit" />
      </label>
      <div className="form-actions">
        <button type="submit" className="button primary" data-testid="finish-submit" disabled={tooLong}>
          Finish episode
        </button>
        <button type="button" className="button subtle" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
