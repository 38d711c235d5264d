import { useState } from "react";
import type { Deployment } from "../api/deployments";
import { ErrorBanner } from "../components/ErrorBanner";
import { Table } from "../components/Table";
import { formatDateTime } from "../components/format";
import { useRollback } from "./queries";

/** How a checkpoint is prompted, when it is not Loupe's own text grammar: its answer format, and whether it reads the
 * screenshots. */
function CheckpointSpeaks({ checkpoint }: { checkpoint: Deployment["checkpoint"] }) {
  const format = checkpoint.action_format ?? "loupe";
  if (format === "loupe" && !checkpoint.reads_images) return null;
  return (
    <div className="muted small" data-testid="checkpoint-format">
      answers in {format}
      {checkpoint.reads_images ? ", reads screenshots" : ""}
    </div>
  );
}

/** Every deployment, newest first; managers roll back to any earlier one in one click (and a confirmation). */
export function DeploymentList({ projectId, deployments, manage }: { projectId: number; deployments: Deployment[]; manage: boolean }) {
  const rollback = useRollback(projectId);
  const [asked, setAsked] = useState<number | null>(null);
  if (deployments.length === 0) return <p className="empty-state small">Nothing has been deployed yet.</p>;
  return (
    <>
      {rollback.isError && <ErrorBanner error={rollback.error} title="The rollback did not happen; the deployment is unchanged" />}
      {rollback.isSuccess && (
        <p className="muted small" data-testid="rollback-done">
          Rolled back: {rollback.data.checkpoint.name} serves new episodes now; running ones finish on their checkpoint.
        </p>
      )}
      <Table
        testId="deployment-table"
        rows={deployments}
        rowKey={(d) => d.id}
        rowProps={(d) => ({ "data-testid": "deployment-row", "data-active": d.active })}
        columns={[
          {
            header: "Checkpoint",
            cell: (d) => (
              <>
                <strong>{d.checkpoint.name}</strong>
                <CheckpointSpeaks checkpoint={d.checkpoint} />
              </>
            ),
          },
          { header: "Backend", cell: (d) => d.backend },
          {
            header: "Active",
            cell: (d) => (d.active ? <span className="badge status-running">active</span> : <span className="muted">—</span>),
          },
          { header: "Since", cell: (d) => formatDateTime(d.activated_at) },
          { header: "Until", cell: (d) => formatDateTime(d.deactivated_at) },
          { header: "Why", cellProps: () => ({ className: "muted small" }), cell: (d) => d.reason },
          {
            hidden: !manage,
            className: "row-actions",
            cell: (d) =>
              !d.active &&
              (asked === d.id ? (
                <span className="button-row">
                  <button
                    type="button"
                    className="button small danger"
                    disabled={rollback.isPending}
                    data-testid="rollback-confirm"
                    onClick={() => rollback.mutate(d.id, { onSettled: () => setAsked(null) })}
                  >
                    {rollback.isPending ? "Rolling back…" : `Serve ${d.checkpoint.name} again`}
                  </button>
                  <button type="button" className="button small subtle" onClick={() => setAsked(null)}>
                    Cancel
                  </button>
                </span>
              ) : (
                <button type="button" className="button small" data-testid="rollback" onClick={() => setAsked(d.id)}>
                  Roll back to this
                </button>
              )),
          },
        ]}
      />
    </>
  );
}
