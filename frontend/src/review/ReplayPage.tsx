import { isWideScreen } from "../components/ScreenshotView";
import { useEffect, useRef, useState } from "react";
import { Link, useNavigate, useSearchParams } from "react-router";
import { useSession } from "../components/useSession";
import { EndReason, OutcomeBadge, StatusBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { FinishSummary } from "../components/FinishSummary";
import { InstructionCard } from "../components/InstructionCard";
import { LoadError } from "../components/NoAccess";
import { countOf, formatDateTime, formatReward } from "../components/format";
import { ManagersOnly } from "../components/ManagersOnly";
import { ProjectFrame } from "../shell/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { canManage } from "../components/permissions";
import { shortcutHints, shortcutLabel } from "../components/shortcuts";
import { apiParams } from "./filters";
import type { Transcript } from "../api/audio";
import type { ReplayEpisode, Review, StepLabel } from "../api/review";
import { useNeighbours, useReplay, useReviews, useSubmitReview, useTranscript } from "./queries";
import { replayCommand } from "./replay";
import { type Draft, draftOf, ReviewForm } from "./ReviewForm";
import { ReviewStatusBadge } from "./ReviewStatusBadge";
import { JudgePanel } from "./JudgePanel";
import { BranchPanel } from "./BranchPanel";
import { StepPanel, StepScreen, StepStrip } from "./StepPanel";
import { ThinkAloud } from "./ThinkAloud";
import { QueueBar } from "./QueueBar";
import { useReviewNext } from "./queueQueries";
import "./review.css";

interface ReplayProps {
  projectId: number;
  episode: ReplayEpisode;
  transcript: Transcript | undefined;
  reviews: Review[];
  userId: number | undefined;
  listQuery: string;
  previous: string | null;
  next: string | null;
  /** Called once a review is saved (a replay opened from a review queue goes on to the next episode). */
  onReviewed?: () => void;
}

/** One episode's replay and review form; mounted afresh for each episode (its step and draft are its own). */
function Replay({ projectId, episode, transcript, reviews, userId, listQuery, previous, next, onReviewed }: ReplayProps) {
  const navigate = useNavigate();
  const steps = episode.steps;
  const [current, setCurrent] = useState(0);
  const mine = reviews.find((r) => r.reviewer.id === userId);
  const others = reviews.filter((r) => r.reviewer.id !== userId);
  const [draft, setDraft] = useState<Draft>(() => draftOf(mine));
  const [savedAt, setSavedAt] = useState<string | null>(null);
  const submit = useSubmitReview(episode.id);
  const step = steps.find((s) => s.index === current) ?? steps[0];

  // The key handler reads the latest state through a ref, so it is bound once.
  const latest = useRef({ current, steps, previous, next, draft });
  latest.current = { current, steps, previous, next, draft };

  useEffect(() => {
    function onKey(event: KeyboardEvent) {
      const command = replayCommand(event);
      if (!command) return;
      const { current, steps, previous, next, draft } = latest.current;
      const at = steps.findIndex((s) => s.index === current);
      const go = (i: number) => steps[i] && setCurrent(steps[i].index);
      event.preventDefault();
      if (typeof command === "object") setDraft({ ...draft, grade: command.grade });
      else if (command === "previous-step") go(Math.max(0, at - 1));
      else if (command === "next-step") go(Math.min(steps.length - 1, at + 1));
      else if (command === "first-step") go(0);
      else if (command === "last-step") go(steps.length - 1);
      else if (command === "previous-episode" && previous) navigate(previous);
      else if (command === "next-episode" && next) navigate(next);
      else if (command === "accept") setDraft({ ...draft, verdict: "accept" });
      else if (command === "reject") setDraft({ ...draft, verdict: "reject" });
    }
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [navigate]);

  function setLabel(index: number, label: StepLabel | "") {
    const labels = { ...draft.step_labels };
    if (label) labels[String(index)] = label;
    else delete labels[String(index)];
    setDraft({ ...draft, step_labels: labels });
  }

  function onSubmit() {
    if (!draft.verdict) return;
    submit.mutate(
      { verdict: draft.verdict, grade: draft.grade, comment: draft.comment, step_labels: draft.step_labels },
      {
        onSuccess: (saved) => {
          setSavedAt(saved.updated_at);
          onReviewed?.();
        },
      },
    );
  }

  const stepWords = (transcript?.words ?? []).filter((w) => w.step === step?.index);
  return (
    <div className="replay" data-testid="replay">
      <div className="page-header replay-header">
        <Link className="button subtle small" to={`/projects/${projectId}/review${listQuery ? `?${listQuery}` : ""}`} data-testid="replay-back">
          ← List
        </Link>
        <h1>
          Episode #{episode.id} <span className="muted">· {episode.task.task_name} · seed {episode.seed}</span>
        </h1>
        <div className="header-spacer" />
        <div className="button-row">
          <button
            type="button"
            className="button small"
            disabled={!previous}
            onClick={() => previous && navigate(previous)}
            data-testid="replay-previous-episode"
            title="Previous episode in the list"
          >
            ← Previous <kbd>{shortcutLabel("previous-episode", "replay")}</kbd>
          </button>
          <button
            type="button"
            className="button small"
            disabled={!next}
            onClick={() => next && navigate(next)}
            data-testid="replay-next-episode"
            title="Next episode in the list"
          >
            Next <kbd>{shortcutLabel("next-episode", "replay")}</kbd> →
          </button>
        </div>
      </div>
      <div className="replay-facts muted small">
        <StatusBadge status={episode.status} />
        {episode.outcome && <OutcomeBadge outcome={episode.outcome} />}
        <ReviewStatusBadge status={episode.review_status} />
        <span>{episode.mode}</span>
        <span>reward {formatReward(episode.reward)}</span>
        <span>{countOf(episode.n_steps, "step")}</span>
        <span>{countOf(episode.n_interventions, "intervention")}</span>
        <span>{episode.n_void} void</span>
        <span>checkpoint {episode.checkpoint?.name ?? "—"}</span>
        {episode.rl_run && <span>RL run {episode.rl_run}</span>}
        {episode.created_by && <span>by {episode.created_by.username}</span>}
        <span>finished {formatDateTime(episode.finished_at)}</span>
        <EndReason reason={episode.end_reason} className="" />
      </div>
      <InstructionCard episode={episode} />
      {(episode.outcome || episode.comment || episode.review_reason) && (
        <section className="card replay-finish" aria-label="How the episode was finished">
          <FinishSummary episode={episode} />
        </section>
      )}
      {step && <StepStrip steps={steps} current={step.index} labels={draft.step_labels} onSelect={setCurrent} />}
      <div className={`replay-body${step && isWideScreen(step.width, step.height) ? " replay-body-wide" : ""}`}>
        <div className="replay-left">
          {steps.length === 0 || !step ? (
            <p className="empty-state">This episode has no steps to replay.</p>
          ) : (
            <StepScreen step={step} episodeId={episode.id} />
          )}
          <p className="replay-shortcuts muted small" aria-label="Keyboard shortcuts">
            {shortcutHints("replay").map(({ label, hint }) => (
              <span key={label}>
                <kbd>{label}</kbd> {hint}
              </span>
            ))}
          </p>
        </div>
        <div className="replay-right">
          {step && (
            <StepPanel
              step={step}
              count={steps.length}
              words={stepWords}
              label={draft.step_labels[String(step.index)] ?? ""}
              onLabel={(label) => setLabel(step.index, label)}
            />
          )}
          <ThinkAloud transcript={transcript} steps={steps} current={step?.index ?? 0} onStep={setCurrent} />
          <JudgePanel episodeId={episode.id} finished={episode.status === "finished"} />
          <BranchPanel
            projectId={projectId}
            episodeId={episode.id}
            step={step?.index}
            ended={["finished", "failed", "interrupted"].includes(episode.status)}
            branchOf={episode.branch_of}
          />
          <ReviewForm
            draft={draft}
            onChange={setDraft}
            onSubmit={onSubmit}
            submitting={submit.isPending}
            error={submit.error}
            mine={submit.data ?? mine}
            savedAt={savedAt}
            status={episode.review_status}
            others={others}
            nextEpisode={next}
            onStep={setCurrent}
            reviewable={episode.status === "finished" || episode.status === "failed"}
          />
        </div>
      </div>
    </div>
  );
}

function ReplayLoader({ projectId, episodeId }: { projectId: number; episodeId: number }) {
  const [params] = useSearchParams();
  const { user } = useSession();
  const episode = useReplay(episodeId);
  const transcript = useTranscript(episodeId);
  const reviews = useReviews(episodeId);
  const neighbours = useNeighbours(episodeId, apiParams(projectId, params, false));
  const listQuery = params.toString();
  const queueId = Number(params.get("queue")) || null;
  const reviewNext = useReviewNext(projectId);
  const link = (id: number | null | undefined) =>
    id ? `/projects/${projectId}/review/${id}${listQuery ? `?${listQuery}` : ""}` : null;

  if (episode.isError) return <LoadError error={episode.error} resource="episode" title="Could not load the episode" onRetry={() => episode.refetch()} />;
  // An annotator reviewing from a queue may not read the others' reviews (a blind review): none are shown.
  if (reviews.isError && !queueId) return <ErrorBanner error={reviews.error} title="Could not load the reviews" onRetry={() => reviews.refetch()} />;
  if (episode.isPending || (reviews.isPending && !queueId)) return <Spinner label="Loading the episode…" />;
  if (episode.data.project !== projectId) {
    return <ErrorBanner message={`Episode ${episodeId} belongs to another project. Open it from that project's review list.`} />;
  }
  return (
    <>
      {transcript.isError && <ErrorBanner error={transcript.error} title="Could not load the think-aloud transcript" onRetry={() => transcript.refetch()} />}
      {neighbours.isError && <ErrorBanner error={neighbours.error} title="Could not find the next episodes in the list" />}
      {queueId && (
        <QueueBar projectId={projectId} queueId={queueId} itemId={Number(params.get("item")) || null} next={reviewNext} />
      )}
      <Replay
        key={episodeId}
        projectId={projectId}
        episode={episode.data}
        transcript={transcript.data}
        reviews={reviews.data ?? []}
        userId={user?.id}
        listQuery={listQuery}
        previous={link(neighbours.data?.previous)}
        next={link(neighbours.data?.next)}
        onReviewed={queueId ? () => reviewNext.go(queueId) : undefined}
      />
    </>
  );
}

/** `/projects/:projectId/review/:episodeId`: replay an episode step by step, with its think-aloud, and review it. */
export function ReplayPage() {
  const projectId = useIdParam("projectId");
  const episodeId = useIdParam("episodeId");
  const { user } = useSession();
  const listQuery = useSearchParams()[0].toString();
  const list = `/projects/${projectId}/review${listQuery ? `?${listQuery}` : ""}`;
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Review", to: list }, { label: `Episode ${episodeId}` }]}>
      {(project) =>
        canManage(project, user) || new URLSearchParams(listQuery).has("queue") ? (
          <ReplayLoader projectId={projectId} episodeId={episodeId} />
        ) : (
          <ManagersOnly projectId={projectId} title="Review" what="review and grade episodes" />
        )
      }
    </ProjectFrame>
  );
}
