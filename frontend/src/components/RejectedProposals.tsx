import type { Rejection, Step } from "../api/episodes";
import { actionText } from "./grammar";

/** What a rejected proposal would have done, as the grammar writes it. */
export function rejectedAction(rejection: Pick<Rejection, "action" | "action_text">): string {
  if (rejection.action_text) return rejection.action_text;
  if (!rejection.action) return "an answer that was not an action";
  try {
    return actionText(rejection.action);
  } catch {
    return `${rejection.action.name}(${JSON.stringify(rejection.action.args ?? {})})`;
  }
}

/** "click(x=1, y=1) — “that is the logo” (ann), proposal 1". */
export function rejectionLine(rejection: Rejection): string {
  const reason = rejection.reason.trim() ? `“${rejection.reason.trim()}”` : "no reason given";
  const who = rejection.rejected_by ? ` (${rejection.rejected_by})` : "";
  return `${rejectedAction(rejection)} — ${reason}${who}, proposal ${rejection.attempt}`;
}

/**
 * The sentence for a person's turn that did exactly what the model proposed (Step.correction "same"), naming the
 * proposal: the person acted on their own, and the model happened to propose the same.
 */
export function sameAsProposalText(step: { actor: Step["actor"]; proposal?: { action_text?: string } | null }): string {
  const proposed = step.proposal?.action_text ? ` (${step.proposal.action_text})` : "";
  return step.actor === "edited"
    ? `Edited, but kept the model's proposed action${proposed}: no correction.`
    : `A person acted, and did what the model had proposed${proposed}: no correction.`;
}

/**
 * The model's proposals a person rejected before this step ran, oldest first; a proposal that repeated
 * an action already rejected here is marked, since asking again did not change the model's mind.
 */
export function RejectedProposals({ rejections }: { rejections: Rejection[] | undefined }) {
  if (!rejections || rejections.length === 0) return null;
  return (
    <div className="rejected-proposals" data-testid="step-rejections">
      <h3>Rejected before this step ran</h3>
      <ul className="rejected-list">
        {rejections.map((rejection) => (
          <li key={rejection.attempt} data-testid="step-rejection" data-repeated={rejection.repeated ? "true" : "false"}>
            <span className="mono strike">{rejectedAction(rejection)}</span>
            <span>
              {" — "}
              {rejection.reason.trim() ? `“${rejection.reason.trim()}”` : <span className="muted">no reason given</span>}
              {rejection.rejected_by ? ` (${rejection.rejected_by})` : ""}, proposal {rejection.attempt}
            </span>
            {rejection.repeated && (
              <span className="badge repeated-badge" data-testid="rejection-repeated">
                the model repeated a rejected step
              </span>
            )}
            {rejection.thought && <div className="muted small rejected-thought">Its thought: {rejection.thought}</div>}
          </li>
        ))}
      </ul>
    </div>
  );
}
