import { Link, useNavigate, useSearchParams } from "react-router";
import { useSession } from "../components/useSession";
import { EndReason, OutcomeBadge, StatusBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime, formatReward } from "../components/format";
import { ManagersOnly } from "../components/ManagersOnly";
import { ProjectFrame } from "../shell/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { useIdParam } from "../components/useIdParam";
import { canManage } from "../components/permissions";
import { apiParams, type FilterKey, readFilters, withFilter } from "./filters";
import { cursorOf, type ReviewEpisode } from "../api/review";
import { useReviewList } from "./queries";
import { CalibrationPanel } from "./CalibrationPanel";
import { QueuesPanel } from "./QueuesPanel";
import { ReviewFilters } from "./ReviewFilters";
import { ReviewStatusBadge } from "./ReviewStatusBadge";
import "./review.css";

/** The sortable columns: the API's orderings, newest id breaking ties. */
const SORTABLE: Record<string, { desc: string; asc: string }> = {
  id: { desc: "-id", asc: "id" },
  n_steps: { desc: "-n_steps", asc: "n_steps" },
  n_interventions: { desc: "-n_interventions", asc: "-n_interventions" },
};

function SortHeader({
  field,
  label,
  ordering,
  onSort,
  numeric,
}: {
  field: keyof typeof SORTABLE;
  label: string;
  ordering: string;
  onSort: (ordering: string) => void;
  numeric?: boolean;
}) {
  const { desc, asc } = SORTABLE[field];
  const active = ordering === desc || ordering === asc;
  const direction = ordering === asc && asc !== desc ? "ascending" : "descending";
  const next = ordering === desc && asc !== desc ? asc : desc;
  return (
    <th className={numeric ? "num" : undefined} aria-sort={active ? direction : "none"}>
      <button type="button" className="review-sort" onClick={() => onSort(next)} data-testid={`review-sort-${field}`}>
        {label}
        <span aria-hidden="true" className={active ? "review-sort-mark active" : "review-sort-mark"}>
          {active && direction === "ascending" ? "▲" : "▼"}
        </span>
      </button>
    </th>
  );
}

function reviewText(episode: ReviewEpisode): string {
  const s = episode.review_summary ?? {};
  if (!s.reviews) return "";
  const grade = typeof s.grade_mean === "number" ? ` · grade ${s.grade_mean.toFixed(1)}` : "";
  return `${s.reviews} review${s.reviews === 1 ? "" : "s"}${grade}`;
}

function ReviewList({ projectId }: { projectId: number }) {
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const filters = readFilters(params);
  const list = useReviewList(apiParams(projectId, params));
  const rows = list.data?.results ?? [];
  const ordering = filters.ordering || "-id";
  const query = params.toString();

  function setFilter(key: FilterKey, value: string) {
    setParams(withFilter(params, key, value), { replace: true });
  }

  function page(link: string | null) {
    const next = new URLSearchParams(params);
    const cursor = cursorOf(link);
    if (cursor) next.set("cursor", cursor);
    else next.delete("cursor");
    setParams(next);
  }

  const open = (episode: ReviewEpisode) =>
    navigate(`/projects/${projectId}/review/${episode.id}${query ? `?${query}` : ""}`);

  return (
    <>
      <div className="page-header">
        <h1>Review</h1>
        <span className="muted">Replay finished episodes, then accept or reject and grade them.</span>
        <div className="header-spacer" />
        {list.isFetching && !list.isPending && <Spinner label="Refreshing…" />}
      </div>
      <CalibrationPanel projectId={projectId} />
      <QueuesPanel projectId={projectId} manager />
      <ReviewFilters
        projectId={projectId}
        filters={filters}
        params={params}
        onChange={setFilter}
        onClear={() => setParams(filters.ordering ? { ordering: filters.ordering } : {}, { replace: true })}
      />
      {list.isPending && <Spinner label="Loading episodes…" />}
      {list.isError && <ErrorBanner error={list.error} title="Could not load the list" onRetry={() => list.refetch()} />}
      <Table
        className="review-table"
        testId="review-table"
        rows={rows}
        rowKey={(episode) => episode.id}
        rowProps={(episode) => ({
          className: "review-clickable",
          "data-testid": "review-row",
          "data-episode-id": episode.id,
          onClick: () => open(episode),
        })}
        empty={
          !list.isPending &&
          !list.isError && (
            <p className="empty-state" data-testid="review-empty">
              No episodes match these filters.{" "}
              {filters.review_status === "unreviewed" ? "Every finished episode here has been reviewed, or none has finished yet." : ""}
            </p>
          )
        }
        columns={[
          {
            headerCell: (
              <SortHeader field="id" label="Episode" ordering={ordering} onSort={(o) => setFilter("ordering", o === "-id" ? "" : o)} />
            ),
            cell: (episode) => (
              <Link
                to={`/projects/${projectId}/review/${episode.id}${query ? `?${query}` : ""}`}
                onClick={(e) => e.stopPropagation()}
              >
                #{episode.id}
              </Link>
            ),
          },
          {
            header: "Task",
            cell: (episode) => (
              <>
                <span className="review-task">{episode.task.task_name}</span>
                {episode.task.split === "eval" && <span className="badge split-eval">eval</span>}
                {/* the mode here, not in a column of its own: the table fits a 1280 px window */}
                <div className="muted small">
                  seed {episode.seed} · {episode.mode}
                </div>
              </>
            ),
          },
          {
            header: "Status",
            cell: (episode) => (
              <>
                <StatusBadge status={episode.status} />
                <EndReason reason={episode.end_reason} />
              </>
            ),
          },
          {
            header: "Outcome",
            cell: (episode) => (
              <>
                <OutcomeBadge outcome={episode.outcome} />
                {episode.review_reason ? (
                  <span className="badge status-warning review-disagrees" title={episode.review_reason} data-testid="review-disagrees">
                    check disagrees
                  </span>
                ) : null}
              </>
            ),
          },
          { header: "Reward", className: "num", cellProps: () => ({ className: "num mono" }), cell: (e) => formatReward(e.reward) },
          {
            headerCell: <SortHeader field="n_steps" label="Steps" numeric ordering={ordering} onSort={(o) => setFilter("ordering", o)} />,
            cellProps: () => ({ className: "num mono" }),
            cell: (episode) => episode.n_steps,
          },
          {
            headerCell: (
              <SortHeader field="n_interventions" label="Interv." numeric ordering={ordering} onSort={(o) => setFilter("ordering", o)} />
            ),
            cellProps: () => ({ className: "num mono" }),
            cell: (episode) => episode.n_interventions || <span className="muted">0</span>,
          },
          {
            header: "Void",
            className: "num",
            cellProps: () => ({ className: "num mono" }),
            cell: (episode) => (episode.n_void ? <span className="review-void-count">{episode.n_void}</span> : <span className="muted">0</span>),
          },
          {
            header: "Annotator",
            cellProps: () => ({ className: "review-name" }),
            cell: (episode) => episode.created_by?.username ?? <span className="muted">—</span>,
          },
          {
            header: "Checkpoint",
            cellProps: () => ({ className: "mono small review-name" }),
            cell: (episode) =>
              episode.checkpoint?.name ?? (episode.rl_run ? `RL run ${episode.rl_run}` : <span className="muted">—</span>),
          },
          {
            header: "Review",
            cell: (episode) => (
              <>
                <ReviewStatusBadge status={episode.review_status} />
                <div className="muted small">{reviewText(episode)}</div>
              </>
            ),
          },
          { header: "Created", cellProps: () => ({ className: "muted small" }), cell: (e) => formatDateTime(e.created_at) },
        ]}
        paging={{
          previous: list.data?.previous ?? null,
          next: list.data?.next ?? null,
          busy: list.isFetching,
          onPage: page,
          testId: "review",
        }}
      />
    </>
  );
}

/** `/projects/:projectId/review`: the trajectory list, filtered by the URL's query, for managers; an annotator
 * sees only the review queues that assign them. */
export function ReviewPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Review" }]}>
      {(project) =>
        canManage(project, user) ? (
          <ReviewList projectId={projectId} />
        ) : (
          <>
            <QueuesPanel projectId={projectId} manager={false} />
            <ManagersOnly projectId={projectId} title="Review" what="browse and grade any episode" />
          </>
        )
      }
    </ProjectFrame>
  );
}
