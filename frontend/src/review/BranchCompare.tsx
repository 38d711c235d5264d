import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { type BranchComparison, branchKeys, type ComparisonSide, fetchComparison } from "../api/branch";
import type { ReplayStep } from "../api/review";
import { OutcomeBadge, StatusBadge } from "../components/Badge";
import { countOf, formatReward } from "../components/format";
import { ManagersOnly } from "../components/ManagersOnly";
import { LoadError } from "../components/NoAccess";
import { canManage } from "../components/permissions";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { useSession } from "../components/useSession";
import { ProjectFrame } from "../shell/ProjectFrame";
import { ReviewStatusBadge } from "./ReviewStatusBadge";
import { stepActionText } from "./replay";
import { StepScreen } from "./StepPanel";
import "./review.css";

const DECIDED_BY = { review: "the reviews", reward: "the reward", judge: "the judge" } as const;

/** What the pair is, said plainly: which episode's step is preferred at which step, and why. */
export function pairSentence(comparison: BranchComparison): string {
  const { pair, branch, parent } = comparison;
  if (!pair) return comparison.no_pair;
  const chosen = pair.chosen === "branch" ? `the branch's (episode ${branch.episode.id})` : `the parent's (episode ${parent?.episode.id})`;
  const other = pair.chosen === "branch" ? "the parent's" : "the branch's";
  const where = pair.in_dataset ? "It is a pair in the DPO bucket." : "It joins the DPO bucket once the branch has finished.";
  return `At step ${pair.index + 1} they acted differently on the same screen: ${chosen} step is preferred over ${other}, decided by ${DECIDED_BY[pair.by]}. ${where}`;
}

function Summary({ side, role, projectId }: { side: ComparisonSide; role: string; projectId: number }) {
  const { episode, judge } = side;
  return (
    <div className="card" data-testid={`compare-${role}-summary`}>
      <h2>
        {role === "branch" ? "Branch" : "Parent"}:{" "}
        <Link to={`/projects/${projectId}/review/${episode.id}`}>episode {episode.id}</Link>
      </h2>
      <p className="button-row">
        <StatusBadge status={episode.status} /> <OutcomeBadge outcome={episode.outcome} />
        <span>reward {formatReward(episode.reward)}</span>
        <span>
          review <ReviewStatusBadge status={episode.review_status} testId={`compare-${role}-review`} />
        </span>
        <span data-testid={`compare-${role}-judge`}>
          judge: {judge?.verdict ?? "no verdict"}
          {judge?.reason ? <span className="muted small"> ({judge.reason})</span> : null}
        </span>
      </p>
      <p className="muted small">
        {episode.mode} · {countOf(episode.n_steps, "step")}{episode.end_reason ? ` · ${episode.end_reason}` : ""}
      </p>
    </div>
  );
}

function StepCell({ step, episodeId, mark }: { step: ReplayStep | undefined; episodeId: number; mark: string }) {
  if (!step) return <div className="muted small compare-empty">No step here: the episode had ended.</div>;
  return (
    <div data-testid={`compare-step-${episodeId}-${step.index}`}>
      {mark && (
        <p>
          <span className={`badge ${mark === "chosen" ? "outcome-success" : "outcome-failure"}`} data-testid="compare-mark">
            {mark}
          </span>
        </p>
      )}
      <StepScreen step={step} episodeId={episodeId} />
      <p className="small">
        <span className="muted">{step.actor === "model" ? "model" : `person (${step.actor})`}:</span> {step.thought || <span className="muted">no thought</span>}
      </p>
      <p className="mono small">{step.void ? `void turn: ${step.void_reason}` : stepActionText(step)}</p>
    </div>
  );
}

/** Whether the two screens of a step count as the same state, and if not, what differs. */
function ScreensLine({ screen }: { screen: { index: number; differs: string | null } | undefined }) {
  if (!screen) return null;
  return (
    <p className="muted small user-text" data-testid="compare-screens" data-same={screen.differs ? "false" : "true"}>
      {screen.differs
        ? `The screens count as different: ${screen.differs}.`
        : "Same screen on both (the same address and elements), so their steps can be compared."}
    </p>
  );
}

/** The two continuations side by side from the branch point: one row a step, the pair's step marked. */
export function BranchCompareView({ comparison, projectId }: { comparison: BranchComparison; projectId: number }) {
  const { branch, parent, pair, branched_at: start } = comparison;
  const last = Math.max(...[branch, parent].flatMap((side) => side?.steps.map((s) => s.index) ?? []), start);
  const indices = Array.from({ length: last - start + 1 }, (_, k) => start + k);
  const mark = (side: "branch" | "parent", index: number) =>
    pair && pair.index === index ? (pair.chosen === side ? "chosen" : "rejected") : "";
  const columns = { display: "grid", gridTemplateColumns: "1fr 1fr", gap: "1rem", alignItems: "start" } as const;
  return (
    <>
      <div className="page-header">
        <h1>
          Episode {branch.episode.id} beside {parent ? `episode ${parent.episode.id}` : "its deleted parent"}
        </h1>
        <span className="muted">
          From step {start + 1}, where the branch acted anew; the steps before it replay the parent's.
        </span>
      </div>
      <p className={pair ? "banner banner-info" : "muted"} role="status" data-testid="compare-pair">
        {pairSentence(comparison)}
      </p>
      <div style={columns}>
        <Summary side={branch} role="branch" projectId={projectId} />
        {parent ? <Summary side={parent} role="parent" projectId={projectId} /> : <div className="card muted">The parent episode was deleted.</div>}
      </div>
      {indices.map((index) => (
        <section key={index} aria-label={`Step ${index + 1}`} data-testid={`compare-row-${index}`}>
          <h3>Step {index + 1}</h3>
          <ScreensLine screen={comparison.screens?.find((s) => s.index === index)} />
          <div style={columns}>
            <StepCell step={branch.steps.find((s) => s.index === index)} episodeId={branch.episode.id} mark={mark("branch", index)} />
            {parent ? (
              <StepCell step={parent.steps.find((s) => s.index === index)} episodeId={parent.episode.id} mark={mark("parent", index)} />
            ) : (
              <div />
            )}
          </div>
        </section>
      ))}
    </>
  );
}

function CompareLoader({ projectId, branchId }: { projectId: number; branchId: number }) {
  const comparison = useQuery({ queryKey: branchKeys.comparison(branchId), queryFn: ({ signal }) => fetchComparison(branchId, signal) });
  if (comparison.isError) {
    return <LoadError error={comparison.error} resource="episode" title="Could not compare the branch" onRetry={() => comparison.refetch()} />;
  }
  if (comparison.isPending) return <Spinner label="Loading both episodes…" />;
  return <BranchCompareView comparison={comparison.data} projectId={projectId} />;
}

/** `/projects/:projectId/review/:episodeId/compare`: a branch beside its parent (managers, as review is). */
export function BranchComparePage() {
  const projectId = useIdParam("projectId");
  const branchId = useIdParam("episodeId");
  const { user } = useSession();
  return (
    <ProjectFrame
      projectId={projectId}
      trail={[
        { label: "Review", to: `/projects/${projectId}/review` },
        { label: `Episode ${branchId}`, to: `/projects/${projectId}/review/${branchId}` },
        { label: "Compare" },
      ]}
    >
      {(project) =>
        canManage(project, user) ? (
          <CompareLoader projectId={projectId} branchId={branchId} />
        ) : (
          <ManagersOnly projectId={projectId} title="Review" what="compare a branch with its parent" />
        )
      }
    </ProjectFrame>
  );
}
