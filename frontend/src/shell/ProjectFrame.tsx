import type { ReactNode } from "react";
import type { Project } from "../api/projects";
import { useProject } from "../components/projectQueries";
import { Breadcrumbs, type Crumb } from "../components/Breadcrumbs";
import { Link } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { LoadError } from "../components/NoAccess";
import { ProjectNav } from "./ProjectNav";
import { Spinner } from "../components/Spinner";

interface ProjectFrameProps {
  projectId: number;
  /** Crumbs after "Projects › <project>"; none on the overview. */
  trail?: Crumb[];
  children: (project: Project) => ReactNode;
}

/** Loads a project and frames one of its pages with breadcrumb and section navigation. */
export function ProjectFrame({ projectId, trail = [], children }: ProjectFrameProps) {
  const project = useProject(projectId);

  if (!Number.isFinite(projectId)) {
    return (
      <main className="page">
        <ErrorBanner title="No such page" message="This address does not name a project." />
        <Link to="/">Back to your projects</Link>
      </main>
    );
  }
  if (project.isPending) {
    return (
      <main className="page">
        <Spinner label="Loading project…" />
      </main>
    );
  }
  if (project.isError) {
    return (
      <main className="page">
        <Breadcrumbs items={[{ label: "Projects", to: "/" }, { label: `Project ${projectId}` }]} />
        <LoadError error={project.error} resource="project" onRetry={() => project.refetch()} />
      </main>
    );
  }

  const crumbs: Crumb[] = [
    { label: "Projects", to: "/" },
    { label: project.data.name, to: `/projects/${projectId}` },
    ...trail,
  ];
  return (
    <main className="page">
      <Breadcrumbs items={crumbs} />
      <ProjectNav projectId={projectId} />
      {children(project.data)}
    </main>
  );
}
