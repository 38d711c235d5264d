import { Link } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { isOverLimit } from "../components/limits";
import { useServerErrors } from "../components/useServerErrors";
import { shortcutLabel } from "../components/shortcuts";
import { formatDateTime, stepNumber } from "../components/format";
import type { Review, ReviewStatus, StepLabel, Verdict } from "../api/review";
import { STEP_LABELS } from "./queries";
import { ReviewStatusBadge } from "./ReviewStatusBadge";

export interface Draft {
  verdict: Verdict | null;
  grade: number | null;
  comment: string;
  step_labels: Record<string, StepLabel>;
}

export function draftOf(review: Review | undefined): Draft {
  return review
    ? { verdict: review.verdict, grade: review.grade, comment: review.comment, step_labels: { ...review.step_labels } }
    : { verdict: null, grade: null, comment: "", step_labels: {} };
}

interface ReviewFormProps {
  draft: Draft;
  onChange: (draft: Draft) => void;
  onSubmit: () => void;
  submitting: boolean;
  error: unknown;
  /** The caller's review as the server holds it (after a submit, or from before). */
  mine: Review | undefined;
  /** Set once the caller has submitted on this page. */
  savedAt: string | null;
  status: ReviewStatus;
  others: Review[] | undefined;
  nextEpisode: string | null;
  onStep: (index: number) => void;
  /** Only finished (or failed) episodes can be reviewed. */
  reviewable: boolean;
}

function labelText(label: StepLabel): string {
  return STEP_LABELS.find((l) => l.value === label)?.label ?? label;
}

/**
 * Verdict, grade, step labels (set beside each step) and comment. Other reviewers' verdicts are
 * shown only once the caller's own is in, so they cannot sway it (agreement is measured on them).
 */
export function ReviewForm({
  draft,
  onChange,
  onSubmit,
  submitting,
  error,
  mine,
  savedAt,
  status,
  others,
  nextEpisode,
  onStep,
  reviewable,
}: ReviewFormProps) {
  const server = useServerErrors(error);
  const tooLong = isOverLimit("review_comment", draft.comment);
  const canSubmit = Boolean(draft.verdict) && !submitting && reviewable && !tooLong;
  const labelled = Object.entries(draft.step_labels)
    .filter(([, label]) => label)
    .sort(([a], [b]) => Number(a) - Number(b));
  return (
    <section className="card review-form" aria-label="Your review" data-testid="review-form">
      <div className="section-header">
        <h2>{mine ? "Your review" : "Review this episode"}</h2>
        <div className="header-spacer" />
        <span className="muted small">Episode is</span>
        <ReviewStatusBadge status={status} testId="review-status" />
      </div>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (canSubmit) onSubmit();
        }}
      >
        <div className="review-controls">
          <div className="button-row" role="group" aria-label="Verdict">
            <button
              type="button"
              className={`button review-verdict review-verdict-accept${draft.verdict === "accept" ? " chosen" : ""}`}
              aria-pressed={draft.verdict === "accept"}
              data-testid="verdict-accept"
              onClick={() => onChange({ ...draft, verdict: "accept" })}
            >
              ✓ Accept <kbd>{shortcutLabel("accept", "replay")}</kbd>
            </button>
            <button
              type="button"
              className={`button review-verdict review-verdict-reject${draft.verdict === "reject" ? " chosen" : ""}`}
              aria-pressed={draft.verdict === "reject"}
              data-testid="verdict-reject"
              onClick={() => onChange({ ...draft, verdict: "reject" })}
            >
              ✗ Reject <kbd>{shortcutLabel("reject", "replay")}</kbd>
            </button>
          </div>
          <div className="button-row review-grades" role="group" aria-label="Grade">
            <span className="muted small">Grade</span>
            {[1, 2, 3, 4, 5].map((g) => (
              <button
                key={g}
                type="button"
                className={`button small review-grade${draft.grade === g ? " chosen" : ""}`}
                aria-pressed={draft.grade === g}
                data-testid={`grade-${g}`}
                onClick={() => onChange({ ...draft, grade: draft.grade === g ? null : g })}
              >
                {g}
              </button>
            ))}
          </div>
        </div>
        <div className="review-labelled small" data-testid="review-labels">
          <span className="muted">Step labels: </span>
          {labelled.length === 0 ? (
            <span className="muted">none yet — label a step beside it.</span>
          ) : (
            labelled.map(([index, label]) => (
              <button key={index} type="button" className={`review-label review-label-${label}`} onClick={() => onStep(Number(index))}>
                step {stepNumber(Number(index))}: {labelText(label)}
              </button>
            ))
          )}
        </div>
        <Field label="Comment" limit={{ kind: "review_comment", value: draft.comment }} problems={server.errors.comment}>
          {(control) => (
            <textarea
              {...control}
              className="typed-text"
              rows={3}
              value={draft.comment}
              placeholder="What was good or wrong in this episode (optional)"
              data-testid="review-comment"
              onChange={(e) => {
                onChange({ ...draft, comment: e.target.value });
                server.clear("comment");
              }}
              onKeyDown={(e) => {
                if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && canSubmit) {
                  e.preventDefault();
                  onSubmit();
                }
              }}
            />
          )}
        </Field>
        {error != null && (
          <ErrorBanner error={error} fieldErrors={server.errors} besideFields={["comment"]} title="The review was not saved" />
        )}
        <div className="form-actions">
          <button
            type="submit"
            className="button primary"
            disabled={!canSubmit}
            data-testid="review-submit"
            title={draft.verdict ? "Ctrl+Enter in the comment submits too" : "Choose accept or reject first"}
          >
            {submitting ? "Saving…" : mine ? "Update review" : "Submit review"}
          </button>
          {!reviewable ? (
            <span className="muted small" data-testid="review-not-finished">
              This episode has not finished yet; review it once it has.
            </span>
          ) : (
            !draft.verdict && <span className="muted small">Choose accept or reject to submit.</span>
          )}
        </div>
      </form>
      {savedAt && mine && (
        <div className="banner banner-ok" role="status" data-testid="review-saved">
          <div className="banner-body">
            <strong>Saved.</strong> You {mine.verdict === "accept" ? "accepted" : "rejected"} this episode
            {mine.grade ? ` with grade ${mine.grade}` : ""}; the episode is now <strong>{status}</strong>.
          </div>
          {nextEpisode && (
            <Link className="button small" to={nextEpisode} data-testid="review-next-episode">
              Next episode <kbd>{shortcutLabel("next-episode", "replay")}</kbd>
            </Link>
          )}
        </div>
      )}
      <div className="review-others" data-testid="other-reviews">
        <h3>Other reviewers</h3>
        {others === undefined ? null : !mine ? (
          <p className="muted small">
            {others.length === 0
              ? "Nobody else has reviewed this episode yet."
              : `${others.length} other review${others.length === 1 ? "" : "s"}; shown once you submit yours, so they do not sway it.`}
          </p>
        ) : others.length === 0 ? (
          <p className="muted small">Nobody else has reviewed this episode yet.</p>
        ) : (
          <ul className="review-others-list">
            {others.map((r) => (
              <li key={r.id} data-testid="other-review">
                <strong>{r.reviewer.username}</strong>{" "}
                <span className={`badge review-${r.verdict === "accept" ? "accepted" : "rejected"}`}>{r.verdict}</span>
                {r.grade ? <span className="muted"> · grade {r.grade}</span> : null}
                <span className="muted small"> · {formatDateTime(r.updated_at)}</span>
                {r.comment && <div className="small typed-text">{r.comment}</div>}
              </li>
            ))}
          </ul>
        )}
      </div>
    </section>
  );
}
