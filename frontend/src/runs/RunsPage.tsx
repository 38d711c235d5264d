import type { Deployment } from "../api/deployments";
import type { TrainingRun } from "../api/runs";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime } from "../components/format";
import { LineChart } from "../components/LineChart";
import { ProjectFrame } from "../shell/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { isActive, useDeployments, useRuns } from "./queries";
import {
  isColdStart,
  latestMetric,
  lossSeries,
  nextSteps,
  progressText,
  runStatusText,
  runTimes,
  runTitle,
  runWarnings,
  thinnedNote,
  validationSummary,
} from "./runView";
import "./runs.css";

function ActiveDeployment({ deployments }: { deployments: Deployment[] | undefined }) {
  const active = deployments?.find((d) => d.active);
  return (
    <section className="card deployment-card" data-testid="active-deployment" aria-label="Deployed policy">
      <div>
        <div className="muted small">Deployed policy</div>
        {active ? (
          <strong data-testid="active-checkpoint">{active.checkpoint.name}</strong>
        ) : (
          <strong data-testid="active-checkpoint">None yet</strong>
        )}
      </div>
      {active ? (
        <span className="muted small">
          {active.backend} backend · since {formatDateTime(active.activated_at)}
          {active.reason ? ` · ${active.reason}` : ""}
        </span>
      ) : (
        <span className="muted small">Episodes cannot run until a policy is trained and deployed.</span>
      )}
    </section>
  );
}

function ProgressBar({ run }: { run: TrainingRun }) {
  const percent = Math.round(Math.min(1, Math.max(0, run.progress || 0)) * 100);
  const tone =
    run.status === "succeeded" ? (runWarnings(run).length ? " warn" : " done") : run.status === "failed" ? " failed" : "";
  return (
    <div
      className={`progress${tone}`}
      role="progressbar"
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={percent}
      aria-label={`${runTitle(run)}: ${percent}%`}
      data-testid="run-progress"
    >
      <div className="progress-bar" style={{ width: `${percent}%` }} />
    </div>
  );
}

export function RunCard({ run }: { run: TrainingRun }) {
  const series = lossSeries(run);
  const warned = runWarnings(run).length > 0;
  const latest = latestMetric(run);
  const percent = Math.round(Math.min(1, Math.max(0, run.progress || 0)) * 100);
  return (
    <li className="card run-card" data-testid="run" data-status={run.status}>
      <div className="section-header">
        <h2 data-testid="run-title">{runTitle(run)}</h2>
        <span
          className={`badge status-${run.status}${warned && run.status === "succeeded" ? " status-warning" : ""}`}
          data-testid="run-status"
          data-warnings={warned ? "true" : undefined}
        >
          {runStatusText(run)}
        </span>
        {isColdStart(run) && <span className="badge">cold start</span>}
        <div className="header-spacer" />
        <span className="muted small">
          {run.finished_at ? `finished ${formatDateTime(run.finished_at)}` : run.started_at ? `started ${formatDateTime(run.started_at)}` : `queued ${formatDateTime(run.created_at)}`}
        </span>
      </div>
      <RunWarnings run={run} />
      <ProgressBar run={run} />
      <p className="muted small">
        {percent}%
        {progressText(run) ? ` · ${progressText(run)}` : ""}
        {latest && typeof latest.loss === "number" ? ` · loss ${latest.loss.toFixed(4)}` : ""}
        {run.status === "queued" ? " · waiting for a training worker" : ""}
        {run.checkpoint ? ` · produced ${run.checkpoint.name}` : ""}
      </p>
      {runTimes(run) && (
        <p className="muted small" data-testid="run-times">
          {runTimes(run)}
        </p>
      )}
      {series.length > 0 ? (
        <>
          <LineChart series={series} width={640} height={220} xLabel="step" yLabel="loss" title="Loss" />
          {thinnedNote(run) && (
            <p className="muted small" data-testid="run-thinned">
              {thinnedNote(run)}
            </p>
          )}
          {validationSummary(run) && (
            <p className="muted small" data-testid="run-validation">
              {validationSummary(run)}
            </p>
          )}
        </>
      ) : (
        isActive(run) && <p className="muted small">The loss curve appears once the trainer reports its first step.</p>
      )}
      {run.status === "failed" && (
        <div data-testid="run-failure">
          <ErrorBanner title="The run failed" message={run.error || "The trainer stopped without saying why."} />
          <p data-testid="run-next-steps">
            <strong>What to do next: </strong>
            {nextSteps(run)}
          </p>
          {run.log_tail && (
            <details open>
              <summary>Last lines of the log</summary>
              <pre className="log-tail" data-testid="run-log">
                {run.log_tail}
              </pre>
            </details>
          )}
        </div>
      )}
    </li>
  );
}

/** What a person should know about how training went, above the numbers (a budget that cut it short...). */
export function RunWarnings({ run }: { run: TrainingRun }) {
  const warnings = runWarnings(run);
  if (warnings.length === 0) return null;
  return (
    <div className="banner banner-warning" role="note" data-testid="run-warnings">
      <div className="banner-body">
        <strong>{run.status === "succeeded" ? "Finished with a warning" : "Warning"}</strong>
        {warnings.length === 1 ? (
          <p data-testid="run-warning">{warnings[0]}</p>
        ) : (
          <ul className="banner-list">
            {warnings.map((warning) => (
              <li key={warning} data-testid="run-warning">
                {warning}
              </li>
            ))}
          </ul>
        )}
      </div>
    </div>
  );
}

/** `/projects/:projectId/runs`: training runs with live progress and loss curves, and what is deployed. */
export function RunsPage() {
  const projectId = useIdParam("projectId");
  const runs = useRuns(projectId);
  const anyActive = runs.data?.some(isActive) ?? false;
  const deployments = useDeployments(projectId, anyActive);
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Runs" }]}>
      {() => (
        <>
          <div className="page-header">
            <h1>Runs</h1>
            {anyActive && <Spinner label="Live: updating every 2 s" />}
          </div>
          {deployments.isError ? (
            <ErrorBanner error={deployments.error} title="Could not load deployments" onRetry={() => deployments.refetch()} />
          ) : (
            <ActiveDeployment deployments={deployments.data} />
          )}
          {runs.isPending && <Spinner label="Loading runs…" />}
          {runs.isError && <ErrorBanner error={runs.error} onRetry={() => runs.refetch()} />}
          {runs.data && runs.data.length === 0 && (
            <p className="empty-state" data-testid="runs-empty">
              No training runs yet. The first one trains the v0 policy from scripted demonstrations.
            </p>
          )}
          {runs.data && runs.data.length > 0 && (
            <ul className="run-list" data-testid="run-list">
              {runs.data.map((run) => (
                <RunCard key={run.id} run={run} />
              ))}
            </ul>
          )}
        </>
      )}
    </ProjectFrame>
  );
}
