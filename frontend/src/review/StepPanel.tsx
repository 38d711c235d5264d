import { useEffect, useRef } from "react";
import type { Actor } from "../api/episodes";
import { formatReward, stepNumber } from "../components/format";
import { RejectedProposals, rejectionLine, sameAsProposalText } from "../components/RejectedProposals";
import { isWideScreen, ScreenshotView } from "../components/ScreenshotView";
import type { TranscriptWord } from "../api/audio";
import type { ReplayStep, StepLabel } from "../api/review";
import { PolishedThought } from "./PolishedThought";
import { STEP_LABELS } from "./queries";
import { proposalActionText, proposalThought, stepActionText } from "./replay";
import { ShellOutput } from "../session/ShellOutput";

const ACTOR_TEXT: Record<Actor, string> = { model: "model", human: "human", edited: "edited" };

export function ActorBadge({ actor }: { actor: Actor }) {
  return (
    <span className={`badge actor-badge actor-badge-${actor}`} data-testid="replay-actor" title={actorTitle(actor)}>
      {ACTOR_TEXT[actor] ?? actor}
    </span>
  );
}

function actorTitle(actor: Actor): string {
  if (actor === "edited") return "A person corrected the model's proposal";
  if (actor === "human") return "A person acted in the model's place";
  return "The model acted";
}

/** The step's screenshot with what was done drawn solid and, when a person overrode it, the model's proposal dashed. */
export function StepScreen({ step, episodeId, columnWidth = 400 }: { step: ReplayStep; episodeId: number; columnWidth?: number }) {
  // a desktop's wide screen fills the page's width on the replay (ReplayPage lays it out above the panels)
  const wide = isWideScreen(step.width, step.height);
  // a takeover that did what the model proposed draws no second mark: there is nothing to compare
  const overridden = step.actor !== "model" && step.correction !== "same" && step.proposal?.action ? step.proposal.action : null;
  return (
    <div className={`replay-screen${wide ? " replay-screen-wide" : ""}`}>
      {step.screenshot_url ? (
        <ScreenshotView
          src={step.screenshot_url}
          width={step.width}
          height={step.height}
          alt={`Episode ${episodeId}, step ${stepNumber(step.index)}`}
          action={step.action}
          proposal={overridden}
          displayWidth={wide ? undefined : columnWidth}
          testId="replay-screenshot"
        />
      ) : (
        <div className="screenshot-placeholder">This step has no screenshot.</div>
      )}
      <div className="replay-legend muted small">
        <span>
          <span className="replay-legend-mark replay-legend-action" aria-hidden="true" /> {step.actor === "model" ? "action" : "what the person did"}
        </span>
        {overridden && (
          <span>
            <span className="replay-legend-mark replay-legend-proposal" aria-hidden="true" /> model's proposal
          </span>
        )}
        {step.url && <span className="mono replay-url" title={step.url}>{step.url}</span>}
      </div>
    </div>
  );
}

interface StepPanelProps {
  step: ReplayStep;
  count: number;
  words: TranscriptWord[];
  label: StepLabel | "";
  onLabel: (label: StepLabel | "") => void;
}

/** Everything about the current step: who acted, the thought and action, the proposal beside its correction, void turns, what was said and the thought written from it. */
export function StepPanel({ step, count, words, label, onLabel }: StepPanelProps) {
  const action = stepActionText(step);
  const spoken = words.map((w) => w.word.trim()).join(" ");
  const corrected = step.proposal !== null && step.correction !== "same";
  return (
    <section className="card replay-step" data-testid="replay-current" data-index={step.index} aria-label={`Step ${stepNumber(step.index)}`}>
      <div className="section-header">
        <h2>
          Step {stepNumber(step.index)} <span className="muted">of {count}</span>
        </h2>
        <ActorBadge actor={step.actor} />
        {step.void && <span className="badge void">void turn</span>}
        {step.done && <span className="badge">last</span>}
        {step.confidence != null && (
          <span className="badge" data-testid="replay-confidence" title="How sure the model was of its proposed action">
            confidence {step.confidence.toFixed(2)}
            {step.info?.asked ? " · asked a person" : ""}
          </span>
        )}
        <div className="header-spacer" />
        <span className="muted small">reward {formatReward(step.reward)}</span>
      </div>
      {step.void && (
        <div className="replay-void-note" data-testid="replay-void" role="note">
          <strong>Void turn:</strong> {step.void_reason || "the model's output did not parse as an action"}. Nothing ran;
          the turn is masked out of RL and left out of SFT rows.
        </div>
      )}
      <RejectedProposals rejections={step.rejections} />
      {corrected && step.proposal ? (
        <div className="replay-compare">
          <div className="replay-compare-side replay-compare-proposal" data-testid="replay-proposal">
            <h3>Model proposed</h3>
            <p className="thought">{proposalThought(step.proposal) || <span className="muted">(no thought)</span>}</p>
            <pre className="action">{proposalActionText(step.proposal) || "(void)"}</pre>
          </div>
          <div className="replay-compare-side replay-compare-correction" data-testid="replay-correction">
            <h3>{step.actor === "human" ? "The person did instead" : "Corrected to"}</h3>
            <p className="thought">{step.thought || <span className="muted">(no thought written)</span>}</p>
            <pre className="action">{action || "—"}</pre>
          </div>
        </div>
      ) : (
        <>
          {step.correction === "same" && step.actor !== "model" && (
            <p className="muted small" data-testid="replay-same">
              {sameAsProposalText(step)}
            </p>
          )}
          <h3>Thought</h3>
          <p className="thought" data-testid="replay-thought">
            {step.thought || <span className="muted">(no thought)</span>}
          </p>
          {!step.void && (
            <>
              <h3>Action</h3>
              <pre className="action" data-testid="replay-action">
                {action || "—"}
              </pre>
            </>
          )}
        </>
      )}
      <ShellOutput step={step} />
      <PolishedThought step={step} spoken={spoken} />
      <label className="field inline step-label-field">
        <span>Label this step</span>
        <select
          value={label}
          data-testid="step-label"
          data-label={label}
          onChange={(e) => onLabel(e.target.value as StepLabel | "")}
        >
          <option value="">no label</option>
          {STEP_LABELS.map((l) => (
            <option key={l.value} value={l.value}>
              {l.label}
            </option>
          ))}
        </select>
      </label>
    </section>
  );
}

/**
 * One thumbnail a step: click to show it. The current one is marked; void and corrected steps, and
 * steps whose proposals a person rejected first, stand out.
 */
export function StepStrip({
  steps,
  current,
  labels,
  onSelect,
}: {
  steps: ReplayStep[];
  current: number;
  labels: Record<string, StepLabel>;
  onSelect: (index: number) => void;
}) {
  const strip = useRef<HTMLOListElement>(null);
  useEffect(() => {
    // Keep the current step's thumbnail in sight as the replay moves: long episodes scroll the strip
    // sideways (only the strip: the page stays where the person is).
    const list = strip.current;
    const thumb = list?.querySelector<HTMLElement>(`[data-index="${current}"]`);
    if (!list || !thumb) return;
    if (thumb.offsetLeft < list.scrollLeft) list.scrollLeft = thumb.offsetLeft - 4;
    else if (thumb.offsetLeft + thumb.offsetWidth > list.scrollLeft + list.clientWidth) {
      list.scrollLeft = thumb.offsetLeft + thumb.offsetWidth - list.clientWidth + 4;
    }
  }, [current]);
  return (
    <ol className="replay-strip" aria-label="Steps" ref={strip}>
      {steps.map((step) => {
        const classes = ["replay-thumb"];
        if (step.index === current) classes.push("is-current");
        if (step.void) classes.push("is-void");
        if (step.actor !== "model" && step.correction !== "same") classes.push("is-corrected");
        const rejections = step.rejections ?? [];
        if (rejections.length) classes.push("has-rejections");
        const label = labels[String(step.index)];
        const title = step.void ? `Void: ${step.void_reason}` : stepActionText(step);
        return (
          <li key={step.index}>
            <button
              type="button"
              className={classes.join(" ")}
              data-testid="replay-step"
              data-index={step.index}
              aria-current={step.index === current ? "step" : undefined}
              onClick={() => onSelect(step.index)}
              data-rejections={rejections.length || undefined}
              title={rejections.length ? `${title}\nRejected before it ran:\n${rejections.map(rejectionLine).join("\n")}` : title}
            >
              {step.screenshot_url ? (
                <img src={step.screenshot_url} alt="" loading="lazy" />
              ) : (
                <span className="timeline-noimg">no image</span>
              )}
              <span className="replay-thumb-caption">
                <span>{stepNumber(step.index)}</span>
                {step.actor !== "model" && <span className={`replay-thumb-actor replay-thumb-actor-${step.actor}`}>{step.actor}</span>}
                {step.void && <span className="replay-thumb-void">void</span>}
              </span>
              {rejections.length > 0 && (
                <span className="replay-thumb-rejected" data-testid="replay-step-rejected">
                  {rejections.length} rejected
                </span>
              )}
              {label && <span className={`review-label review-label-${label}`}>{label}</span>}
            </button>
          </li>
        );
      })}
    </ol>
  );
}
