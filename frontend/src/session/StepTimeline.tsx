import type { Step } from "../api/episodes";
import { stepNumber } from "../components/format";
import { rejectionLine } from "../components/RejectedProposals";

/**
 * Every executed step as a thumbnail strip with who acted; a step a person edited or took shows
 * the model's proposal beside the correction.
 */
export function StepTimeline({
  steps,
  selected,
  onSelect,
}: {
  steps: Step[];
  selected: number | null;
  onSelect: (index: number) => void;
}) {
  if (steps.length === 0) {
    return (
      <div className="timeline-empty muted" data-testid="step-timeline">
        No steps yet. They appear here as the agent acts.
      </div>
    );
  }
  return (
    <ol className="timeline" data-testid="step-timeline" aria-label="Steps">
      {steps.map((step) => {
        const corrected = step.actor !== "model" && step.proposal && step.correction !== "same";
        const same = step.actor !== "model" && step.correction === "same";
        const rejections = step.rejections ?? [];
        return (
          <li key={step.index}>
            <button
              type="button"
              className={`timeline-step${selected === step.index ? " selected" : ""}${step.void ? " void" : ""}${corrected ? " corrected" : ""}`}
              aria-pressed={selected === step.index}
              aria-label={`Step ${stepNumber(step.index)} by ${step.actor}: ${step.action_text || "no action"}`}
              title={step.action_text || step.void_reason || "no action"}
              onClick={() => onSelect(step.index)}
              data-actor={step.actor}
            >
              {step.screenshot_url ? (
                <img src={step.screenshot_url} alt="" loading="lazy" width={step.width || 160} height={step.height || 210} />
              ) : (
                <span className="timeline-noimg">no screenshot</span>
              )}
              <span className="timeline-caption">
                <span className="mono">#{stepNumber(step.index)}</span>
                <span className={`actor actor-${step.actor}`}>{step.actor}</span>
              </span>
              <span className="timeline-action mono" data-testid="timeline-action">
                {step.action_text || (step.void ? "void" : "—")}
              </span>
              {corrected && (
                <span className="timeline-proposal mono" data-testid="timeline-proposal" title={`The model proposed: ${step.proposal?.action_text || "(void)"}`}>
                  was {step.proposal?.action_text || "void"}
                </span>
              )}
              {same && (
                <span className="timeline-same" data-testid="timeline-same" title="A person acted, and did exactly what the model proposed">
                  {step.actor === "edited" ? "edited; no change" : "took over; did what the model proposed"}
                </span>
              )}
              {rejections.length > 0 && (
                <span
                  className="timeline-rejections"
                  data-testid="timeline-rejections"
                  title={`Rejected before this step ran:\n${rejections.map(rejectionLine).join("\n")}`}
                >
                  {rejections.length} rejected
                </span>
              )}
            </button>
          </li>
        );
      })}
    </ol>
  );
}
