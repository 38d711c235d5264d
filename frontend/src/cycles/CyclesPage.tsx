import { useSession } from "../components/useSession";
import { ErrorBanner } from "../components/ErrorBanner";
import { ProjectFrame } from "../shell/ProjectFrame";
import { Spinner } from "../components/Spinner";
import { useIdParam } from "../components/useIdParam";
import { canManage } from "../components/permissions";
import { useDeployments } from "../runs/queries";
import { CycleCard } from "./CycleCard";
import { CycleSettingsForm } from "./CycleSettingsForm";
import { isCycleActive } from "./cycleView";
import { DeploymentList } from "./DeploymentList";
import { useCycles, useCycleSettings, useStartCycle } from "./queries";
import { SuccessChart } from "./SuccessChart";
import "./cycles.css";

function RunNow({ projectId, running }: { projectId: number; running: boolean }) {
  const start = useStartCycle(projectId);
  return (
    <div className="cycle-run-now">
      <button
        type="button"
        className="button primary"
        disabled={start.isPending || running}
        title={running ? "A cycle is running; a project runs one at a time." : undefined}
        data-testid="run-cycle"
        onClick={() => start.mutate()}
      >
        {start.isPending ? "Starting…" : "Run a cycle now"}
      </button>
      {start.isError && <ErrorBanner error={start.error} title="No cycle was started" />}
    </div>
  );
}

function Cycles({ projectId, manage }: { projectId: number; manage: boolean }) {
  const cycles = useCycles(projectId);
  const settings = useCycleSettings(projectId);
  const active = cycles.data?.find(isCycleActive);
  const deployments = useDeployments(projectId, Boolean(active));
  const active_deployment = deployments.data?.find((d) => d.active);
  return (
    <>
      <div className="page-header">
        <h1>Cycles</h1>
        <span className="muted">Snapshot the routed data, train, evaluate on held-out seeds, deploy only what is better.</span>
        <div className="header-spacer" />
        {active && <Spinner label="Live: updating every 2 s" />}
        {manage && <RunNow projectId={projectId} running={Boolean(active)} />}
      </div>
      <section className="card deployment-card" aria-label="Deployed policy">
        <div>
          <div className="muted small">Deployed policy</div>
          <strong data-testid="cycles-active-checkpoint">{deployments.isPending ? "Loading…" : deployments.isError ? "Unknown (could not load)" : (active_deployment?.checkpoint.name ?? "None yet")}</strong>
        </div>
        {active_deployment && (
          <span className="muted small">
            {active_deployment.backend} backend{active_deployment.reason ? ` · ${active_deployment.reason}` : ""}
          </span>
        )}
      </section>
      {cycles.isPending && <Spinner label="Loading cycles…" />}
      {cycles.isError && <ErrorBanner error={cycles.error} title="Could not load the cycles" onRetry={() => cycles.refetch()} />}
      {cycles.data && (
        <>
          <h2 className="section-header">Success rate across iterations</h2>
          <SuccessChart cycles={cycles.data} />
          <h2 className="section-header">Cycles</h2>
          {cycles.data.length === 0 ? (
            <p className="empty-state" data-testid="cycles-empty">
              No cycle has run yet. {manage ? "Run one now, or set a cadence below." : "A manager runs them, or the schedule does."}
            </p>
          ) : (
            <ul className="run-list" data-testid="cycle-list">
              {cycles.data.map((cycle, index) => (
                <CycleCard key={cycle.id} cycle={cycle} projectId={projectId} manage={manage} open={index === 0} />
              ))}
            </ul>
          )}
        </>
      )}
      <h2 className="section-header">Deployments</h2>
      {deployments.isError && <ErrorBanner error={deployments.error} title="Could not load deployments" onRetry={() => deployments.refetch()} />}
      {deployments.data && <DeploymentList projectId={projectId} deployments={deployments.data} manage={manage} />}
      <h2 className="section-header">Settings</h2>
      {settings.isPending && <Spinner label="Loading settings…" />}
      {settings.isError && <ErrorBanner error={settings.error} title="Could not load the settings" onRetry={() => settings.refetch()} />}
      {settings.data && <CycleSettingsForm projectId={projectId} settings={settings.data} manage={manage} />}
    </>
  );
}

/** `/projects/:projectId/cycles`: the flywheel's cycles, their evaluations and decisions, deployments and settings. */
export function CyclesPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Cycles" }]}>
      {(project) => <Cycles projectId={projectId} manage={canManage(project, user)} />}
    </ProjectFrame>
  );
}
