import { useState } from "react";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import type { Agreement } from "../api/judge";
import { useCalibration } from "./judgeQueries";
import { JudgeSettingsForm } from "./JudgeSettingsForm";

/** Cohen's kappa in words (Landis and Koch's bands). */
export function kappaWords(kappa: number | null): string {
  if (kappa === null) return "not defined here (every verdict was the same)";
  if (kappa < 0) return "worse than chance";
  if (kappa < 0.2) return "slight agreement beyond chance";
  if (kappa < 0.4) return "fair agreement beyond chance";
  if (kappa < 0.6) return "moderate agreement beyond chance";
  if (kappa < 0.8) return "substantial agreement beyond chance";
  return "almost perfect agreement";
}

const percent = (share: number | null) => (share === null ? "—" : `${Math.round(share * 100)} %`);

function ConfusionTable({ agreement }: { agreement: Agreement }) {
  const c = agreement.confusion;
  return (
    <Table
      bare
      className="confusion-table"
      testId="calibration-confusion"
      rows={[
        { judge: "success", label: "Judge said success", accept: c.judge_success_review_accept, reject: c.judge_success_review_reject },
        { judge: "failure", label: "Judge said failure", accept: c.judge_failure_review_accept, reject: c.judge_failure_review_reject },
      ]}
      rowKey={(row) => row.judge}
      columns={[
        { rowHeader: true, cell: (row) => row.label },
        {
          header: "Reviewers accepted",
          cellProps: (row) => ({ className: "num mono", "data-testid": `confusion-${row.judge}-accept` }),
          cell: (row) => row.accept,
        },
        {
          header: "Reviewers rejected",
          cellProps: (row) => ({ className: "num mono", "data-testid": `confusion-${row.judge}-reject` }),
          cell: (row) => row.reject,
        },
      ]}
    />
  );
}

/**
 * Can the judge be trusted? Its newest verdicts against the reviewers' conclusions (server-side numbers): how often
 * they agree, Cohen's kappa (agreement beyond chance), the confusion table, and the same per task.
 */
export function CalibrationPanel({ projectId }: { projectId: number }) {
  const [open, setOpen] = useState(false);
  const [settingsOpen, setSettingsOpen] = useState(false);
  const calibration = useCalibration(projectId, open);
  const data = calibration.data;
  return (
    <section className="card calibration" aria-label="Judge calibration" data-testid="calibration">
      <button
        type="button"
        className="button subtle small"
        aria-expanded={settingsOpen}
        onClick={() => setSettingsOpen(!settingsOpen)}
        data-testid="judge-settings-toggle"
      >
        {settingsOpen ? "▾" : "▸"} Judge settings: which judge, how many votes, how many screenshots
      </button>
      {settingsOpen && <JudgeSettingsForm projectId={projectId} />}
      <button
        type="button"
        className="button subtle small"
        aria-expanded={open}
        onClick={() => setOpen(!open)}
        data-testid="calibration-toggle"
      >
        {open ? "▾" : "▸"} Can the judge be trusted? Compare it with the reviewers
      </button>
      {open && calibration.isPending && <Spinner label="Comparing the judge with the reviewers…" />}
      {open && calibration.isError && (
        <ErrorBanner error={calibration.error} title="Could not compare the judge with the reviewers" onRetry={() => calibration.refetch()} />
      )}
      {open && data && (
        <div data-testid="calibration-body">
          {data.episodes === 0 ? (
            <p data-testid="calibration-empty">
              No episode has both a judge's verdict and a settled review yet ({data.judged} judged, {data.not_reviewed} of
              them not reviewed, {data.no_verdict} without a verdict). Review some judged episodes, then look again.
            </p>
          ) : (
            <>
              <p data-testid="calibration-summary">
                On the <strong data-testid="calibration-episodes">{data.episodes}</strong>{" "}
                {data.episodes === 1 ? "episode that both the judge and the reviewers decided, they agree" : "episodes that both the judge and the reviewers decided, they agree"}{" "}
                on{" "}
                <strong data-testid="calibration-agreement">{percent(data.agreement)}</strong>. Cohen's kappa is{" "}
                <strong data-testid="calibration-kappa">{data.kappa === null ? "—" : data.kappa.toFixed(2)}</strong>:{" "}
                {kappaWords(data.kappa)}.
              </p>
              <p className="muted small">
                Left out: {data.no_verdict} judged without a verdict, {data.not_reviewed} judged but not (or not
                unanimously) reviewed. Route by the judge only where it agrees well with people.
              </p>
              <ConfusionTable agreement={data} />
              <Table
                bare
                className="calibration-tasks"
                testId="calibration-tasks"
                rows={data.tasks}
                rowKey={(t) => t.task}
                rowProps={(t) => ({ "data-testid": "calibration-task", "data-task": t.task })}
                columns={[
                  { header: "Task", cell: (t) => t.task },
                  { header: "Episodes", className: "num", cellProps: () => ({ className: "num mono" }), cell: (t) => t.episodes },
                  {
                    header: "Agreement",
                    className: "num",
                    cellProps: () => ({ className: "num mono", "data-testid": "calibration-task-agreement" }),
                    cell: (t) => percent(t.agreement),
                  },
                  {
                    header: "Kappa",
                    className: "num",
                    cellProps: (t) => ({ className: "num mono", "data-testid": "calibration-task-kappa", title: kappaWords(t.kappa) }),
                    cell: (t) => (t.kappa === null ? "—" : t.kappa.toFixed(2)),
                  },
                  {
                    header: "Judge too generous",
                    className: "num",
                    cellProps: () => ({ className: "num mono" }),
                    cell: (t) => t.confusion.judge_success_review_reject,
                  },
                  {
                    header: "Judge too strict",
                    className: "num",
                    cellProps: () => ({ className: "num mono" }),
                    cell: (t) => t.confusion.judge_failure_review_accept,
                  },
                ]}
              />
            </>
          )}
        </div>
      )}
    </section>
  );
}
