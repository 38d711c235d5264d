import type { Step } from "../api/types";

/** Every executed step as a thumbnail strip; the selected one is highlighted. */
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
      {steps.map((step) => (
        <li key={step.index}>
          <button
            type="button"
            className={`timeline-step${selected === step.index ? " selected" : ""}${step.void ? " void" : ""}`}
            aria-pressed={selected === step.index}
            aria-label={`Step ${step.index}: ${step.action_text || "no action"}`}
            title={step.action_text || step.void_reason || "no action"}
            onClick={() => onSelect(step.index)}
          >
            {step.screenshot_url ? (
              <img src={step.screenshot_url} alt="" loading="lazy" width={step.width || 160} height={step.height || 210} />
            ) : (
              <span className="timeline-noimg">no screenshot</span>
            )}
            <span className="timeline-caption">
              <span className="mono">#{step.index}</span>
              <span className={`actor actor-${step.actor}`}>{step.actor}</span>
            </span>
          </button>
        </li>
      ))}
    </ol>
  );
}
