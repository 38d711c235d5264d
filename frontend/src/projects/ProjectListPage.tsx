import { Link } from "react-router";
import { RoleBadge } from "../components/Badge";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { useProjects } from "../components/projectQueries";
import "./projects.css";

/** `/`: the projects the person belongs to, each with their role in it. */
export function ProjectListPage() {
  const projects = useProjects();

  return (
    <main className="page">
      <div className="page-header">
        <h1>Projects</h1>
      </div>
      {projects.isPending && <Spinner label="Loading projects…" />}
      {projects.isError && <ErrorBanner error={projects.error} onRetry={() => projects.refetch()} />}
      {projects.data && projects.data.length === 0 && (
        <div className="empty-state" data-testid="project-list">
          <h2>No projects yet</h2>
          <p>You are not a member of any project. Ask a project admin to add you, then reload this page.</p>
        </div>
      )}
      {projects.data && projects.data.length > 0 && (
        <ul className="project-grid" data-testid="project-list">
          {projects.data.map((project) => (
            <li key={project.id}>
              <Link to={`/projects/${project.id}`} className="card project-card" data-testid="project-card">
                <div className="project-card-head">
                  <h2>{project.name}</h2>
                  <RoleBadge role={project.role} />
                </div>
                <p className="muted clamp">{project.description || "No description."}</p>
                <span className="project-slug">{project.slug}</span>
              </Link>
            </li>
          ))}
        </ul>
      )}
    </main>
  );
}
