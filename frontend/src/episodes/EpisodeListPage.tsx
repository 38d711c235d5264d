import { useState } from "react";
import { Link, useSearchParams } from "react-router";
import { EPISODE_MODES, EPISODE_STATUSES } from "../api/types";
import { OutcomeBadge, StatusBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime, formatReward } from "../components/format";
import { ProjectFrame } from "../components/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { useEpisodeList } from "./queries";
import { StartEpisodeForm } from "./StartEpisodeForm";

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
      {!episodes.isPending && !episodes.isError && rows.length === 0 && (
        <p className="empty-state">
          {status || mode ? "No episodes match these filters." : "No episodes yet. Start one to watch the agent act."}
        </p>
      )}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table className="table" data-testid="episode-table">
            <thead>
              <tr>
                <th>Episode</th>
                <th>Task</th>
                <th className="num">Seed</th>
                <th>Mode</th>
                <th>Status</th>
                <th>Outcome</th>
                <th className="num">Reward</th>
                <th className="num">Steps</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((episode) => (
                <tr key={episode.id}>
                  <td>
                    <Link to={`/episodes/${episode.id}`}>#{episode.id}</Link>
                  </td>
                  <td>{episode.task.task_name}</td>
                  <td className="num mono">{episode.seed}</td>
                  <td>{episode.mode}</td>
                  <td>
                    <StatusBadge status={episode.status} />
                  </td>
                  <td>
                    <OutcomeBadge outcome={episode.outcome} />
                  </td>
                  <td className="num mono">{formatReward(episode.reward)}</td>
                  <td className="num mono">{episode.n_steps}</td>
                  <td className="muted">{formatDateTime(episode.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {episodes.hasNextPage && (
        <div className="load-more">
          <button
            type="button"
            className="button"
            disabled={episodes.isFetchingNextPage}
            onClick={() => episodes.fetchNextPage()}
          >
            {episodes.isFetchingNextPage ? "Loading…" : "Load more"}
          </button>
        </div>
      )}
    </>
  );
}

/** `/projects/:projectId/episodes`: the project's episodes (live and past) and starting new ones. */
export function EpisodeListPage() {
  const projectId = useIdParam("projectId");
  const [starting, setStarting] = useState(false);

  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Live sessions" }]}>
      {() => (
        <>
          <div className="page-header">
            <h1>Live sessions</h1>
            <div className="header-spacer" />
            {!starting && (
              <button type="button" className="button primary" onClick={() => setStarting(true)}>
                Start episode
              </button>
            )}
          </div>
          {starting && <StartEpisodeForm projectId={projectId} onDone={() => setStarting(false)} />}
          <EpisodeTable projectId={projectId} />
        </>
      )}
    </ProjectFrame>
  );
}
