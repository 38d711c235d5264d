import { Link, useSearchParams } from "react-router";
import { type Episode, EPISODE_MODES, EPISODE_STATUSES } from "../api/episodes";
import { useSession } from "../components/useSession";
import { EndReason, OutcomeBadge, StatusBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime, formatReward } from "../components/format";
import { ProjectFrame } from "../shell/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { useIdParam } from "../components/useIdParam";
import { canManage } from "../components/permissions";
import { useEpisodeList, useLiveEpisodes } from "./queries";
import { queueShort } from "./queue";
import { StartEpisodeForm } from "./StartEpisodeForm";
import { AsksWaiting } from "./AsksWaiting";
import "./episodes.css";

function EpisodeTable({ projectId }: { projectId: number }) {
  const [params, setParams] = useSearchParams();
  const status = params.get("status") ?? "";
  const mode = params.get("mode") ?? "";
  const episodes = useEpisodeList({ project: projectId, status, mode });
  const rows = episodes.data?.pages.flatMap((p) => p.results) ?? [];

  function setFilter(key: "status" | "mode", value: string) {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    setParams(next, { replace: true });
  }

  return (
    <>
      <div className="filters">
        <label className="field inline">
          <span>Status</span>
          <select value={status} onChange={(e) => setFilter("status", e.target.value)}>
            <option value="">any</option>
            {EPISODE_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label className="field inline">
          <span>Mode</span>
          <select value={mode} onChange={(e) => setFilter("mode", e.target.value)}>
            <option value="">any</option>
            {EPISODE_MODES.map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
        </label>
        {episodes.isFetching && !episodes.isPending && <Spinner label="Refreshing…" />}
      </div>
      {episodes.isPending && <Spinner label="Loading episodes…" />}
      {episodes.isError && <ErrorBanner error={episodes.error} onRetry={() => episodes.refetch()} />}
      <Table
        testId="episode-table"
        rows={rows}
        rowKey={(episode) => episode.id}
        empty={
          !episodes.isPending &&
          !episodes.isError && (
            <p className="empty-state">
              {status || mode ? "No episodes match these filters." : "No episodes yet. Start one to watch the agent act."}
            </p>
          )
        }
        columns={[
          { header: "Episode", cell: (episode) => <Link to={`/episodes/${episode.id}`}>#{episode.id}</Link> },
          { header: "Task", cell: (episode) => episode.task.task_name },
          { header: "Seed", className: "num", cellProps: () => ({ className: "num mono" }), cell: (episode) => episode.seed },
          { header: "Mode", cell: (episode) => episode.mode },
          {
            header: "Status",
            cell: (episode) => (
              <>
                <StatusBadge status={episode.status} />
                {episode.status === "queued" && (
                  <span className="queue-place" data-testid="queue-place">
                    {queueShort(episode)}
                  </span>
                )}
                <EndReason reason={episode.end_reason} />
              </>
            ),
          },
          { header: "Outcome", cell: (episode) => <OutcomeBadge outcome={episode.outcome} /> },
          {
            header: "Reward",
            className: "num",
            cellProps: () => ({ className: "num mono" }),
            cell: (episode) => formatReward(episode.reward),
          },
          { header: "Steps", className: "num", cellProps: () => ({ className: "num mono" }), cell: (episode) => episode.n_steps },
          { header: "Created", cellProps: () => ({ className: "muted" }), cell: (episode) => formatDateTime(episode.created_at) },
        ]}
        paging={{ hasMore: episodes.hasNextPage, loading: episodes.isFetchingNextPage, onMore: () => episodes.fetchNextPage() }}
      />
    </>
  );
}

function controlText(episode: Episode): string {
  if (episode.control) return `${episode.control.username} controls`;
  if (episode.status === "queued") return `starting: ${queueShort(episode)}`;
  if (episode.ask) return `asks for a person: ${episode.ask.reason}`;
  return episode.mode === "supervised" ? "nobody controls — join to steer" : "running on its own";
}

/** The live episodes a person can join now, the ones waiting for a decision first. */
function LiveQueue({ projectId }: { projectId: number }) {
  const live = useLiveEpisodes(projectId);
  if (live.isPending) return <Spinner label="Loading live episodes…" />;
  if (live.error) return <ErrorBanner error={live.error} onRetry={live.refetch} />;
  if (live.episodes.length === 0) {
    return (
      <p className="empty-state" data-testid="live-queue-empty">
        Nothing is live right now. Start a supervised episode below to steer the agent yourself.
      </p>
    );
  }
  return (
    <ul className="queue" data-testid="live-queue" aria-label="Live episodes">
      {live.episodes.map((episode) => (
        <li key={episode.id}>
          <Link className="card queue-card" to={`/episodes/${episode.id}`} data-testid="queue-item" data-status={episode.status}>
            <span className="queue-card-head">
              <strong>#{episode.id}</strong>
              <span>{episode.task.task_name}</span>
              <span className="header-spacer" />
              <StatusBadge status={episode.status} />
            </span>
            <span className="muted small">
              seed {episode.seed} · {episode.mode} · {episode.n_steps} steps
              {episode.pending_index != null ? " · a step awaits a decision" : ""}
            </span>
            <span className="small">{controlText(episode)}</span>
          </Link>
        </li>
      ))}
    </ul>
  );
}

/**
 * `/projects/:projectId/episodes`: the annotator's queue. Live episodes to join come first, then
 * the form to start a supervised episode, then every episode of the project.
 */
export function EpisodeListPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();

  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Live sessions" }]}>
      {(project) => {
        const manager = canManage(project, user);
        return (
          <>
            <div className="page-header">
              <h1>Live now</h1>
            </div>
            <AsksWaiting projectId={projectId} />
            <LiveQueue projectId={projectId} />
            <h2 className="section-header">{manager ? "Start episodes" : "Start a supervised episode"}</h2>
            <StartEpisodeForm projectId={projectId} canStartAutonomous={manager} />
            <h2 className="section-header">All episodes</h2>
            <EpisodeTable projectId={projectId} />
          </>
        );
      }}
    </ProjectFrame>
  );
}
