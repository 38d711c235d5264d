import { useEffect, useState } from "react";
import { Link } from "react-router";
import type { Step } from "../api/episodes";
import { useSession } from "../components/useSession";
import { EndReason, OutcomeBadge, StatusBadge } from "../components/Badge";
import { FinishSummary } from "../components/FinishSummary";
import { InstructionCard } from "../components/InstructionCard";
import { isOverLimit } from "../components/limits";
import { Breadcrumbs } from "../components/Breadcrumbs";
import { ConnectionBadge } from "../components/ConnectionBadge";
import { ErrorBanner } from "../components/ErrorBanner";
import { LoadError } from "../components/NoAccess";
import { formatDateTime, formatReward, stepNumber } from "../components/format";
import { RejectedProposals, sameAsProposalText } from "../components/RejectedProposals";
import { isWideScreen, ScreenshotView } from "../components/ScreenshotView";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { useEpisode } from "../components/episodeQueries";
import { waitingText } from "../episodes/queue";
import { useProject } from "../components/projectQueries";
import { ControlBar, type FormName } from "./ControlBar";
import { type ControlKey, controlsFor } from "./controls";
import { EditForm, FinishForm, RejectForm } from "./DecisionForms";
import { isTerminal } from "./episodeState";
import { clickAction } from "../components/grammar";
import { type Hint, Notices } from "./Notices";
import { ProposalPanel } from "./ProposalPanel";
import { type SessionAction, shortcutLabel, useShortcuts } from "../components/shortcuts";
import { ShellOutput } from "./ShellOutput";
import { ShortcutsOverlay } from "./ShortcutsOverlay";
import { StepTimeline } from "./StepTimeline";
import { TakeoverPanel } from "./TakeoverPanel";
import { MicrophoneControl } from "./thinkAloud/MicrophoneControl";
import { TranscriptPanel } from "./thinkAloud/TranscriptPanel";
import { PendingUploads } from "./thinkAloud/UploadStatus";
import { useEpisodeStream } from "./useEpisodeStream";
import { VoiceCommandBar } from "./VoiceCommandBar";
import "./session.css";

const SCREENSHOT_WIDTH = 480;

/** How long a shortcut's "why not" hint stays on screen. */
const HINT_MS = 6000;

function StepDetails({ step, live }: { step: Step; live: boolean }) {
  // "same": a takeover that did what the model proposed corrected nothing
  const corrected = step.actor !== "model" && step.proposal && step.correction !== "same";
  return (
    <section className="card step-details" aria-label={live ? "Latest step" : `Step ${stepNumber(step.index)}`}>
      <div className="section-header">
        <h2>{live ? `Latest step (${stepNumber(step.index)})` : `Step ${stepNumber(step.index)}`}</h2>
        <span className={`actor actor-${step.actor}`}>{step.actor}</span>
        {step.void && <span className="badge void">void turn</span>}
        <div className="header-spacer" />
        <span className="muted small">reward {formatReward(step.reward)}</span>
      </div>
      <RejectedProposals rejections={step.rejections} />
      {step.actor !== "model" && step.correction === "same" && (
        <p className="muted small" data-testid="step-same">
          {sameAsProposalText(step)}
        </p>
      )}
      <div className={corrected ? "correction" : undefined}>
        <div>
          {corrected && <h3>{step.actor === "human" ? "The person did" : "The person's edit"}</h3>}
          <h3>Thought</h3>
          <p className="thought" data-testid="step-thought">
            {step.thought || <span className="muted">No thought recorded.</span>}
          </p>
          <h3>Action</h3>
          <pre className="action" data-testid="step-action">
            {step.action_text || "(none)"}
          </pre>
        </div>
        {corrected && step.proposal && (
          <div className="correction-was" data-testid="step-proposal">
            <h3>The model proposed</h3>
            <h3>Thought</h3>
            <p className="thought">{step.proposal.thought || <span className="muted">No thought.</span>}</p>
            <h3>Action</h3>
            <pre className="action">{step.proposal.action_text || "(void)"}</pre>
          </div>
        )}
      </div>
      <ShellOutput step={step} />
      {step.void && step.void_reason && <p className="field-error">Did not parse: {step.void_reason}</p>}
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

/**
 * `/episodes/:episodeId`: the live session. The annotator watches the agent's screen and its
 * proposals and steers it: approve / edit / reject, pause, take over and act, hand back, finish.
 */
export function SessionPage() {
  const episodeId = useIdParam("episodeId");
  const loaded = useEpisode(episodeId);
  const stream = useEpisodeStream(episodeId, loaded.data);
  const project = useProject(loaded.data?.project ?? Number.NaN);
  const session = useSession();
  const [selected, setSelected] = useState<number | null>(null);
  const [openForm, setOpenForm] = useState<FormName | null>(null);
  const [showHelp, setShowHelp] = useState(false);
  const [actThought, setActThought] = useState("");
  const [brokenShot, setBrokenShot] = useState<string | null>(null);
  const [hint, setHint] = useState<Hint | null>(null);
  useEffect(() => {
    if (!hint) return;
    const timer = setTimeout(() => setHint(null), HINT_MS);
    return () => clearTimeout(timer);
  }, [hint]);

  const { live, send } = stream;
  const me =
    live.me ?? (session.user ? { username: session.user.username, role: project.data?.role ?? null } : null);
  const controls = controlsFor(live, me);
  const proposal = live.proposal;

  function open(form: FormName) {
    if (controls[form].enabled) setOpenForm((current) => (current === form ? null : form));
  }

  function command(type: "approve" | "pause" | "resume" | "takeover" | "handback" | "claim" | "release") {
    if (!controls[type].enabled) return;
    if (type === "approve") send({ type, index: proposal?.index });
    else send({ type });
    if (type === "takeover" || type === "handback") setOpenForm(null);
  }

  function act(action: string) {
    if (!controls.act.enabled || isOverLimit("human_thought", actThought)) return;
    // the reason stays for the next actions until the person changes or clears it: one reason often covers several
    send({ type: "act", action, ...(actThought.trim() ? { thought: actThought.trim() } : {}) });
  }

  /** A key whose command is not available now says why instead of doing nothing. */
  function refused(control: ControlKey): boolean {
    if (controls[control].enabled) return false;
    setHint((current) => ({ key: (current?.key ?? 0) + 1, text: controls[control].why }));
    return true;
  }

  useShortcuts((action: SessionAction) => {
    switch (action) {
      case "help":
        setShowHelp((v) => !v);
        return true;
      case "talk":
        return false; // the microphone control handles it: push-to-talk also needs the key's release
      case "submit":
        return false; // the open form handles Ctrl+Enter itself
      case "close":
        if (!showHelp && !openForm) return false;
        setShowHelp(false);
        setOpenForm(null);
        return true;
      case "pause-resume":
        if (controls.pause.enabled) command("pause");
        else if (controls.resume.enabled) command("resume");
        else refused((live.episode ?? loaded.data)?.status === "paused" ? "resume" : "pause");
        return true;
      case "edit":
      case "reject":
      case "finish":
        if (!refused(action)) open(action);
        return true;
      default:
        if (!refused(action)) command(action);
        return true;
    }
  });

  if (!Number.isFinite(episodeId)) {
    return (
      <main className="page">
        <ErrorBanner title="No such page" message="This address does not name an episode." />
        <Link to="/">Back to your projects</Link>
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
        <LoadError error={loaded.error} resource="episode" onRetry={() => loaded.refetch()} />
      </main>
    );
  }

  const episode = live.episode ?? loaded.data;
  const steps = live.steps;
  const latest = steps[steps.length - 1];
  const picked = selected !== null ? steps.find((s) => s.index === selected) : undefined;
  const following = !picked || picked === latest;
  const ended = isTerminal(episode.status);
  const projectName = project.data?.name ?? `Project ${episode.project}`;
  const listLink = `/projects/${episode.project}/episodes`;
  const deciding = live.pending.some((p) => ["approve", "edit", "reject"].includes(p.type));
  // The live screen: the newest live frame while the worker streams one (someone decides or acts), else the
  // open proposal's observation, else the last executed step's (also when the proposal's picture cannot be loaded).
  const stepShown = picked ?? latest;
  const liveShot = following && !ended ? stream.liveScreen : null;
  const proposalShot = following && proposal?.screenshot_url && proposal.screenshot_url !== brokenShot ? proposal : null;
  const screen = liveShot
    ? { src: liveShot.src, width: liveShot.width, height: liveShot.height, label: "The screen now (live)", action: null }
    : proposalShot
    ? {
        src: proposalShot.screenshot_url,
        width: proposalShot.width,
        height: proposalShot.height,
        label: `Screen for proposed step ${proposalShot.index === null ? "" : stepNumber(proposalShot.index)}`,
        action: null,
      }
    : stepShown?.screenshot_url
      ? {
          src: stepShown.screenshot_url,
          width: stepShown.width,
          height: stepShown.height,
          label: `Screen at step ${stepNumber(stepShown.index)}`,
          action: following && proposal ? null : stepShown.action,
        }
      : null;
  const canClick = following && controls.act.enabled && screen !== null;
  const wide = screen !== null && isWideScreen(screen.width, screen.height);
  // Whoever may act on the episode may think aloud; watchers (someone else controls it) read the transcript.
  const canThinkAloud = !ended && me !== null && (!live.control || live.control.username === me.username);
  const shown = stepShown;
  // The place in line: the REST copy is asked again every few seconds while queued (others starting
  // move it; this episode's socket does not hear of them), the socket's copy is from its own last change.
  const queue = loaded.data.status === "queued" ? loaded.data.queue : (episode.queue ?? null);

  return (
    <main className="page page-wide session-page">
      <Breadcrumbs
        items={[
          { label: "Projects", to: "/" },
          { label: projectName, to: `/projects/${episode.project}` },
          { label: "Live sessions", to: listLink },
          { label: `Episode #${episode.id}` },
        ]}
      />
      <div className="page-header">
        <h1>
          Episode #{episode.id} <span className="muted">· {episode.task.task_name}</span>
        </h1>
        <span data-testid="episode-status" data-status={episode.status}>
          <StatusBadge status={episode.status} />
        </span>
        {live.humanControl && !ended && <span className="badge actor-human">human acting</span>}
        <OutcomeBadge outcome={episode.outcome} />
        <div className="header-spacer" />
        <ConnectionBadge state={stream.connection} detail={stream.connectionDetail} onRetry={stream.reconnect} />
        <button type="button" className="button subtle small" onClick={() => setShowHelp(true)} title={`Keyboard shortcuts (${shortcutLabel("help")})`}>
          Shortcuts <kbd>{shortcutLabel("help")}</kbd>
        </button>
      </div>
      {episode.branch_of && (
        <p className="muted branch-line" data-testid="branch-of">
          A branch of{" "}
          <Link to={`/episodes/${episode.branch_of.episode}`}>episode #{episode.branch_of.episode}</Link>: its steps before
          step {stepNumber(episode.branch_of.step)} replay the parent's, and from step {stepNumber(episode.branch_of.step)} on it
          acts anew.
        </p>
      )}
      <InstructionCard episode={episode} />
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
        {episode.rl_run && (
          <div>
            <dt>RL run</dt>
            <dd className="mono" data-testid="episode-rl-run">{episode.rl_run}</dd>
          </div>
        )}
        <div>
          <dt>Steps</dt>
          <dd className="mono">{steps.length}</dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>{formatDateTime(episode.started_at)}</dd>
        </div>
        <div>
          <dt>Watching now</dt>
          <dd>
            <ul className="watchers" data-testid="watchers" aria-label="Connected now">
              {live.watchers.length === 0 && <li className="muted">—</li>}
              {live.watchers.map((name) => (
                <li key={name} className={name === live.control?.username ? "watcher controller" : "watcher"}>
                  {name}
                  {name === me?.username ? " (you)" : ""}
                </li>
              ))}
            </ul>
          </dd>
        </div>
      </dl>

      {ended && (
        <section className="card finished-card" data-testid="episode-finished" aria-label="Episode ended">
          <div className="section-header">
            <h2>Episode {episode.status}</h2>
            <OutcomeBadge outcome={episode.outcome} />
          </div>
          <dl className="facts">
            <div>
              <dt>Ended because</dt>
              <dd data-testid="finished-reason">{episode.end_reason ? <EndReason reason={episode.end_reason} className="" /> : "—"}</dd>
            </div>
          </dl>
          <FinishSummary episode={episode} />
          <Link className="button" to={listLink}>
            Back to live sessions
          </Link>
        </section>
      )}

      {episode.status === "queued" && (
        <section
          className="card waiting-card"
          role="status"
          aria-label="Waiting to start"
          data-testid="queue-position"
          data-ahead={queue ? queue.ahead : ""}
        >
          <span className="spinner" aria-hidden="true" />
          <div>
            <strong data-testid="queue-position-text">{waitingText(queue)}</strong>
            <p className="muted small">
              {queue?.lane === "machines"
                ? "Autonomous episodes wait for a rollout worker; supervised ones have workers of their own."
                : "Live sessions have workers of their own: autonomous batches never hold you back. The screen appears here as soon as a slot is free."}
            </p>
          </div>
        </section>
      )}

      {!ended && (
        <ControlBar
          controls={controls}
          owner={live.control?.username ?? null}
          me={me?.username ?? null}
          paused={episode.status === "paused"}
          humanControl={live.humanControl}
          openForm={openForm}
          onCommand={command}
          onOpen={open}
        />
      )}

      {me && (
        <VoiceCommandBar
          episodeId={episode.id}
          voice={live.voice}
          me={me?.username ?? null}
          clock={stream.clock}
          controls={controls}
          proposal={proposal}
          pending={live.pending}
          acked={live.acked}
          send={send}
        />
      )}

      <div className={wide ? "viewer viewer-wide" : "viewer"} data-testid="viewer" data-wide={wide ? "true" : undefined}>
        <div className="viewer-screen">
          {screen ? (
            <div data-testid="screen-frame" className={canClick ? "screen-acting" : undefined} data-live={liveShot ? "true" : undefined}>
              {liveShot && (
                <span className="badge live-badge" data-testid="live-badge" title="The screen as it is now, streamed while the agent waits for you">
                  Live
                </span>
              )}
              <ScreenshotView
                src={screen.src}
                width={screen.width}
                height={screen.height}
                alt={screen.label}
                action={screen.action}
                proposal={following && !live.humanControl ? proposal?.action : null}
                displayWidth={wide ? undefined : SCREENSHOT_WIDTH}
                testId="episode-screenshot"
                onPick={canClick ? (p) => act(clickAction(p.x, p.y)) : undefined}
                pickTitle="Click here to click this spot"
                onError={() => !liveShot && proposalShot && setBrokenShot(proposalShot.screenshot_url)}
              />
            </div>
          ) : (
            <div className="screenshot-placeholder" data-testid="episode-screenshot-empty">
              {episode.status === "queued" ? "The screen appears once the episode starts." : "No screenshot yet."}
            </div>
          )}
          {following && proposal?.screenshot_url && proposal.screenshot_url === brokenShot && (
            <p className="muted small" data-testid="proposal-shot-missing">
              The proposal's screenshot could not be loaded; showing the last step's screen instead.
            </p>
          )}
          {!following && (
            <button type="button" className="button" onClick={() => setSelected(null)}>
              Back to live
            </button>
          )}
          {canThinkAloud ? (
            <MicrophoneControl episodeId={episode.id} username={me.username} clock={stream.clock} />
          ) : (
            me && <PendingUploads username={me.username} />
          )}
          <TranscriptPanel
            episodeId={episode.id}
            steps={steps}
            liveWords={live.words}
            interim={Object.values(live.interim)}
            connection={stream.connection}
          />
        </div>
        <div className="viewer-side">
          {following && live.humanControl && !ended && controls.act.enabled && screen && (
            <TakeoverPanel
              act={controls.act}
              thought={actThought}
              onThought={setActThought}
              onAct={act}
              screen={{ width: screen.width || 160, height: screen.height || 210 }}
            />
          )}
          {following && proposal && !ended && (
            <ProposalPanel
              proposal={proposal}
              deciding={deciding}
              humanControl={live.humanControl}
              me={me?.username ?? null}
              ask={episode.ask?.reason ?? ""}
              onAnswer={
                controls.approve.enabled ? (answer) => send({ type: "approve", index: proposal.index, answer }) : undefined
              }
            />
          )}
          {openForm === "edit" && proposal && controls.edit.enabled && (
            <EditForm
              key={`${proposal.index}-${proposal.action_text}`}
              proposal={proposal}
              onCancel={() => setOpenForm(null)}
              onSubmit={(edit) => {
                send({ type: "edit", index: proposal.index, action: edit.action, ...(edit.thought ? { thought: edit.thought } : {}) });
                setOpenForm(null);
              }}
            />
          )}
          {openForm === "reject" && proposal && controls.reject.enabled && (
            <RejectForm
              proposal={proposal}
              onCancel={() => setOpenForm(null)}
              onSubmit={(reason) => {
                send({ type: "reject", index: proposal.index, ...(reason ? { reason } : {}) });
                setOpenForm(null);
              }}
            />
          )}
          {openForm === "finish" && controls.finish.enabled && (
            <FinishForm
              onCancel={() => setOpenForm(null)}
              onSubmit={(finish) => {
                send({ type: "finish", outcome: finish.outcome, ...(finish.comment ? { comment: finish.comment } : {}) });
                setOpenForm(null);
              }}
            />
          )}
          {shown ? (
            <StepDetails step={shown} live={following} />
          ) : (
            !proposal && <section className="card muted">The agent has not acted yet.</section>
          )}
        </div>
      </div>

      <h2 className="timeline-title">Timeline</h2>
      <StepTimeline
        steps={steps}
        selected={picked ? picked.index : null}
        onSelect={(index) => setSelected(index === latest?.index ? null : index)}
      />
      <Notices notices={live.notices} onDismiss={stream.dismissNotice} hint={hint} onHintDismiss={() => setHint(null)} />
      {showHelp && <ShortcutsOverlay onClose={() => setShowHelp(false)} />}
    </main>
  );
}
