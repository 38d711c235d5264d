import { useState } from "react";
import type { Step } from "../api/types";
import { OutcomeBadge, StatusBadge } from "../components/Badge";
import { Breadcrumbs } from "../components/Breadcrumbs";
import { ConnectionBadge } from "../components/ConnectionBadge";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime, formatReward } from "../components/format";
import { ScreenshotView } from "../components/ScreenshotView";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { useProject } from "../projects/queries";
import type { Control, Proposal } from "./episodeState";
import { useEpisode } from "./queries";
import { StepTimeline } from "./StepTimeline";
import { useEpisodeStream } from "./useEpisodeStream";

const SCREENSHOT_WIDTH = 480;

function StepDetails({ step, live }: { step: Step; live: boolean }) {
  return (
    <section className="card step-details" aria-label={live ? "Latest step" : `Step ${step.index}`}>
      <div className="section-header">
        <h2>{live ? "Latest step" : `Step ${step.index}`}</h2>
        <span className={`actor actor-${step.actor}`}>{step.actor}</span>
        {step.void && <span className="badge void">void turn</span>}
        <div className="header-spacer" />
        <span className="muted small">reward {formatReward(step.reward)}</span>
      </div>
      <h3>Thought</h3>
      <p className="thought" data-testid="step-thought">
        {step.thought || <span className="muted">No thought recorded.</span>}
      </p>
      <h3>Action</h3>
      <pre className="action" data-testid="step-action">
        {step.action_text || "(none)"}
      </pre>
      {step.void && step.void_reason && <p className="field-error">Did not parse: {step.void_reason}</p>}
      {step.proposal && (
        <details className="proposal-was">
          <summary>The model proposed instead</summary>
          <p className="thought">{step.proposal.thought}</p>
          <pre className="action">{step.proposal.action_text}</pre>
        </details>
      )}
      {step.human_thought && (
        <>
          <h3>Annotator said</h3>
          <p className="thought">{step.human_thought}</p>
        </>
      )}
      {step.url && <p className="muted small mono url">{step.url}</p>}
    </section>
  );
}

function ProposalCard({ proposal }: { proposal: Proposal }) {
  return (
    <section className="card proposal" aria-label="Proposed step" data-testid="proposal">
      <div className="section-header">
        <h2>Proposed next step</h2>
        <span className="badge status-paused">awaiting decision</span>
      </div>
      <h3>Thought</h3>
      <p className="thought">{proposal.thought || <span className="muted">No thought.</span>}</p>
      <h3>Action</h3>
      <pre className="action">{proposal.action_text || "(none)"}</pre>
    </section>
  );
}

/** Where approve / edit / reject / take over will go; today it says who is in control. */
function ControlBar({ control }: { control: Control | null }) {
  return (
    <section className="control-bar" aria-label="Episode controls" data-testid="control-bar">
      <span>
        {control ? (
          <>
            Controlled by <strong>{control.username}</strong>
          </>
        ) : (
          "Nobody is in control: the agent acts on its own."
        )}
      </span>
      <span className="muted small">Approve, edit, reject and take over arrive in the next release.</span>
    </section>
  );
}

/** `/episodes/:episodeId`: the episode as it happens — screenshot, thought, action, timeline. */
export function EpisodeViewerPage() {
  const episodeId = useIdParam("episodeId");
  const loaded = useEpisode(episodeId);
  const stream = useEpisodeStream(episodeId, loaded.data);
  const project = useProject(loaded.data?.project ?? Number.NaN);
  const [selected, setSelected] = useState<number | null>(null);

  if (!Number.isFinite(episodeId)) {
    return (
      <main className="page">
        <ErrorBanner message="This address does not name an episode. Go back to the project's episode list." />
      </main>
    );
  }
  if (loaded.isPending) {
    return (
      <main className="page">
        <Spinner label="Loading episode…" />
      </main>
    );
  }
  if (loaded.isError) {
    return (
      <main className="page">
        <ErrorBanner error={loaded.error} onRetry={() => loaded.refetch()} />
      </main>
    );
  }

  const { live } = stream;
  const episode = live.episode ?? loaded.data;
  const steps = live.steps;
  const latest = steps[steps.length - 1];
  const shown = (selected !== null && steps.find((s) => s.index === selected)) || latest;
  const following = selected === null || shown === latest;
  const projectName = project.data?.name ?? `Project ${episode.project}`;

  return (
    <main className="page page-wide">
      <Breadcrumbs
        items={[
          { label: "Projects", to: "/" },
          { label: projectName, to: `/projects/${episode.project}` },
          { label: "Live sessions", to: `/projects/${episode.project}/episodes` },
          { label: `Episode #${episode.id}` },
        ]}
      />
      <div className="page-header">
        <h1>
          Episode #{episode.id} <span className="muted">· {episode.task.task_name}</span>
        </h1>
        <StatusBadge status={episode.status} />
        <OutcomeBadge outcome={episode.outcome} />
        <div className="header-spacer" />
        <ConnectionBadge state={stream.connection} detail={stream.connectionDetail} onRetry={stream.reconnect} />
      </div>
      <dl className="facts">
        <div>
          <dt>Seed</dt>
          <dd className="mono">{episode.seed}</dd>
        </div>
        <div>
          <dt>Mode</dt>
          <dd>{episode.mode}</dd>
        </div>
        <div>
          <dt>Checkpoint</dt>
          <dd>{episode.checkpoint?.name ?? "—"}</dd>
        </div>
        <div>
          <dt>Reward</dt>
          <dd className="mono">{formatReward(episode.reward)}</dd>
        </div>
        <div>
          <dt>Steps</dt>
          <dd className="mono">{steps.length}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>{formatDateTime(episode.started_at)}</dd>
        </div>
        {episode.end_reason && (
          <div>
            <dt>Ended because</dt>
            <dd>{episode.end_reason}</dd>
          </div>
        )}
      </dl>
      {live.serverError && <ErrorBanner title="The episode reported an error" message={live.serverError} />}

      <ControlBar control={live.control} />

      <div className="viewer">
        <div className="viewer-screen">
          {shown && shown.screenshot_url ? (
            <ScreenshotView
              src={shown.screenshot_url}
              width={shown.width}
              height={shown.height}
              alt={`Screen at step ${shown.index}`}
              action={shown.action}
              proposal={following ? live.proposal?.action : null}
              displayWidth={SCREENSHOT_WIDTH}
              testId="episode-screenshot"
            />
          ) : (
            <div className="screenshot-placeholder" data-testid="episode-screenshot-empty">
              {episode.status === "queued" ? "Waiting for a worker to start this episode…" : "No screenshot yet."}
            </div>
          )}
          {!following && (
            <button type="button" className="button" onClick={() => setSelected(null)}>
              Back to live
            </button>
          )}
        </div>
        <div className="viewer-side">
          {following && live.proposal && <ProposalCard proposal={live.proposal} />}
          {shown ? (
            <StepDetails step={shown} live={following} />
          ) : (
            <section className="card muted">The agent has not acted yet.</section>
          )}
        </div>
      </div>

      <h2 className="timeline-title">Timeline</h2>
      <StepTimeline
        steps={steps}
        selected={shown ? shown.index : null}
        onSelect={(index) => setSelected(index === latest?.index ? null : index)}
      />
    </main>
  );
}
