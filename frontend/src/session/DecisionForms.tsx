import { type FormEvent, type KeyboardEvent, useEffect, useRef, useState } from "react";
import type { EpisodeOutcome } from "../api/types";
import { stepNumber } from "../components/format";
import type { Proposal } from "./episodeState";
import { checkAction, outsideScreen } from "../components/grammar";

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

  useEffect(() => actionRef.current?.focus(), []);

  function submit(event?: FormEvent) {
    event?.preventDefault();
    const parsed = checkAction(action);
    if (error || !parsed.ok) return;
    onSubmit({ thought: thought.trim(), action: parsed.text });
  }

  return (
    <form className="card decision-form" aria-label="Edit the proposal" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>{proposal.index === null ? "Edit the step" : `Edit step ${stepNumber(proposal.index)}`}</h2>
      <label className="field">
        <span>Thought</span>
        <textarea data-testid="edit-thought" rows={3} value={thought} onChange={(e) => setThought(e.target.value)} />
      </label>
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
        <button type="submit" className="button primary" data-testid="edit-submit" disabled={Boolean(error)} title={error ?? "Submit (Ctrl+Enter)"}>
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
  function submit(event?: FormEvent) {
    event?.preventDefault();
    onSubmit(reason.trim());
  }
  return (
    <form className="card decision-form" aria-label="Reject the proposal" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>{proposal.index === null ? "Reject the step" : `Reject step ${stepNumber(proposal.index)}`}</h2>
      <label className="field">
        <span>Reason (optional; the model reads it)</span>
        <input ref={ref} data-testid="reject-reason" value={reason} maxLength={2000} onChange={(e) => setReason(e.target.value)} />
      </label>
      <div className="form-actions">
        <button type="submit" className="button danger" data-testid="reject-submit">
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
  const [outcome, setOutcome] = useState<Exclude<EpisodeOutcome, "">>("success");
  const [comment, setComment] = useState("");
  const ref = useRef<HTMLSelectElement>(null);
  useEffect(() => ref.current?.focus(), []);
  function submit(event?: FormEvent) {
    event?.preventDefault();
    onSubmit({ outcome, comment: comment.trim() });
  }
  return (
    <form className="card decision-form" aria-label="Finish the episode" onSubmit={submit} onKeyDown={(e) => submitOnCtrlEnter(e, submit)}>
      <h2>Finish the episode</h2>
      <label className="field">
        <span>Outcome</span>
        <select ref={ref} data-testid="finish-outcome" value={outcome} onChange={(e) => setOutcome(e.target.value as typeof outcome)}>
          {OUTCOMES.map((o) => (
            <option key={o.value} value={o.value}>
              {o.label}
            </option>
          ))}
        </select>
      </label>
      <label className="field">
        <span>Comment (optional)</span>
        <textarea data-testid="finish-comment" rows={2} maxLength={2000} value={comment} onChange={(e) => setComment(e.target.value)} />
      </label>
      <div className="form-actions">
        <button type="submit" className="button primary" data-testid="finish-submit">
          Finish episode
        </button>
        <button type="button" className="button subtle" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
