import { Link } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime } from "../components/format";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import type { Snapshot, SnapshotFilter } from "../api/datasets";
import { useSnapshots, useTrainOnSnapshot } from "./queries";

export function formatBytes(bytes: number): string {
  if (!bytes) return "0 B";
  const units = ["B", "KB", "MB", "GB", "TB"];
  const i = Math.min(units.length - 1, Math.floor(Math.log(bytes) / Math.log(1024)));
  const value = bytes / 1024 ** i;
  return `${i === 0 ? value : value.toFixed(value < 10 ? 1 : 0)} ${units[i]}`;
}

/** A snapshot's filter in words ("only new · tasks 3, 4 · eval"). */
export function describeFilter(filter: SnapshotFilter, taskNames: Record<number, string> = {}): string {
  const parts: string[] = [];
  if (filter.only_new) parts.push("only new");
  if (filter.tasks?.length) parts.push(`tasks ${filter.tasks.map((t) => taskNames[t] ?? `#${t}`).join(", ")}`);
  if (filter.split) parts.push(filter.split);
  if (filter.mode) parts.push(filter.mode);
  if (filter.checkpoint) parts.push(`checkpoint #${filter.checkpoint}`);
  if (filter.created_after || filter.created_before) parts.push(`${filter.created_after ?? "…"} to ${filter.created_before ?? "…"}`);
  return parts.length ? parts.join(" · ") : "everything routed";
}

function Progress({ snapshot }: { snapshot: Snapshot }) {
  if (!snapshot.started_at) {
    // Queued behind other jobs: a 0 % bar would read as stuck.
    return (
      <div className="snapshot-building" data-testid="snapshot-waiting">
        <span className="spinner" aria-hidden="true" />
        <span className="muted small">Waiting for a free worker…</span>
      </div>
    );
  }
  const percent = Math.round(Math.min(1, Math.max(0, snapshot.progress || 0)) * 100);
  return (
    <div className="snapshot-building">
      <div
        className="progress"
        role="progressbar"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent}
        aria-label={`Building ${snapshot.name}: ${percent}%`}
        data-testid="snapshot-progress"
      >
        <div className="progress-bar" style={{ width: `${Math.max(percent, 3)}%` }} />
      </div>
      <span className="muted small">building… {percent}%</span>
    </div>
  );
}

function TrainButton({ projectId, snapshot }: { projectId: number; snapshot: Snapshot }) {
  const train = useTrainOnSnapshot(projectId);
  if (train.isSuccess) {
    return (
      <span className="small" data-testid="train-queued">
        {train.data.algorithm.toUpperCase()} run #{train.data.id} queued ·{" "}
        <Link to={`/projects/${projectId}/runs`}>watch it on Runs →</Link>
      </span>
    );
  }
  return (
    <>
      <button
        type="button"
        className="button small"
        disabled={train.isPending}
        data-testid="snapshot-train"
        onClick={() => train.mutate(snapshot.id)}
      >
        {train.isPending ? "Queuing…" : "Train on this snapshot"}
      </button>
      {train.isError && <ErrorBanner error={train.error} title="No run was started" />}
    </>
  );
}

/** Every snapshot of the project, newest first; building ones show their progress until they are ready. */
export function SnapshotList({ projectId, taskNames }: { projectId: number; taskNames: Record<number, string> }) {
  const snapshots = useSnapshots(projectId);
  if (snapshots.isPending) return <Spinner label="Loading snapshots…" />;
  if (snapshots.isError) return <ErrorBanner error={snapshots.error} title="Could not load snapshots" onRetry={() => snapshots.refetch()} />;
  const ready = (s: Snapshot) => s.status !== "building" && s.status !== "failed";
  return (
    <Table
      className="snapshot-table"
      testId="snapshot-table"
      rows={snapshots.data}
      rowKey={(s) => s.id}
      rowProps={(s) => ({ "data-testid": "snapshot-row", "data-status": s.status, "data-snapshot-id": s.id })}
      empty={
        <p className="empty-state" data-testid="snapshots-empty">
          No snapshots yet. Freeze one above to train on it or export it.
        </p>
      }
      columns={[
        {
          header: "Snapshot",
          cell: (s) => (
            <>
              <strong className="snapshot-name">{s.name}</strong>
              <div className="muted small">
                #{s.id} · {describeFilter(s.filter, taskNames)}
                {s.routing?.rule ? ` · V by ${s.routing.rule}` : ""}
              </div>
            </>
          ),
        },
        { header: "Kind", cell: (s) => <span className={`badge snapshot-kind-${s.kind}`}>{s.kind}</span> },
        {
          // a building snapshot's progress, or a failed one's error, across the four figures
          header: "Rows",
          className: "num",
          cellProps: (s) =>
            s.status === "building"
              ? { colSpan: 4, className: undefined }
              : s.status === "failed"
                ? { colSpan: 4, className: "snapshot-failed", "data-testid": "snapshot-error" }
                : { className: "num mono", "data-testid": "snapshot-rows" },
          cell: (s) =>
            s.status === "building" ? (
              <Progress snapshot={s} />
            ) : s.status === "failed" ? (
              <>
                <span className="badge status-failed">failed</span> {s.error || "The build stopped without saying why."}
              </>
            ) : (
              s.rows.toLocaleString()
            ),
        },
        {
          header: "Episodes",
          className: "num",
          cellProps: (s) => (ready(s) ? { className: "num mono" } : null),
          cell: (s) => s.episodes.toLocaleString(),
        },
        {
          header: "sha256",
          cellProps: (s) => (ready(s) ? { className: "mono small", title: s.sha256, "data-testid": "snapshot-sha256" } : null),
          cell: (s) => <>{s.sha256.slice(0, 12)}…</>,
        },
        {
          header: "Size",
          className: "num",
          cellProps: (s) => (ready(s) ? { className: "num mono" } : null),
          cell: (s) => formatBytes(s.size_bytes),
        },
        {
          header: "Created",
          cellProps: () => ({ className: "muted small" }),
          cell: (s) => (
            <>
              {formatDateTime(s.created_at)}
              {s.created_by ? <div>by {s.created_by.username}</div> : null}
            </>
          ),
        },
        {
          cellProps: () => ({ className: "row-actions" }),
          cell: (s) =>
            s.status === "ready" && (
              <div className="button-row snapshot-actions">
                <a className="button small" href={s.export_url} download data-testid="snapshot-download">
                  Export .zip
                </a>
                {s.kind === "prm" ? (
                  <span className="muted small" data-testid="snapshot-prm-note">
                    for a process reward model (TRL&apos;s PRMTrainer), not the policy
                  </span>
                ) : (
                  <TrainButton projectId={projectId} snapshot={s} />
                )}
              </div>
            ),
        },
      ]}
    />
  );
}
