import { useSession } from "../components/useSession";
import { Dashboard } from "../dashboard/Dashboard";
import { ManagersOnly } from "../components/ManagersOnly";
import { ProjectFrame } from "../shell/ProjectFrame";
import { useIdParam } from "../components/useIdParam";
import { canManage } from "../components/permissions";
import { useTasks } from "../components/projectQueries";
import { FreezeForm } from "./FreezeForm";
import { RoutingCard } from "./RoutingCard";
import { SnapshotList } from "./SnapshotList";
import "./datasets.css";

function Datasets({ projectId }: { projectId: number }) {
  const tasks = useTasks(projectId);
  const taskNames = Object.fromEntries((tasks.data ?? []).map((t) => [t.id, t.task_name]));
  return (
    <>
      <div className="page-header">
        <h1>Datasets</h1>
        <span className="muted">Route finished episodes into training buckets, freeze snapshots, export and train on them.</span>
      </div>
      <RoutingCard projectId={projectId} />
      <h2 className="section-header">Freeze a snapshot</h2>
      <FreezeForm projectId={projectId} />
      <h2 className="section-header">Snapshots</h2>
      <SnapshotList projectId={projectId} taskNames={taskNames} />
      <h2 className="section-header">Dashboard</h2>
      <Dashboard projectId={projectId} />
    </>
  );
}

/** `/projects/:projectId/datasets`: routing, buckets, snapshots and the flywheel dashboard; managers only. */
export function DatasetsPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Datasets" }]}>
      {(project) =>
        canManage(project, user) ? (
          <Datasets projectId={projectId} />
        ) : (
          <ManagersOnly projectId={projectId} title="Datasets" what="route, freeze and export datasets" />
        )
      }
    </ProjectFrame>
  );
}
