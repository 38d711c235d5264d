import { Link, Outlet, useMatch, useNavigate } from "react-router";
import { useLogout, useSession } from "../components/useSession";
import { useEpisode } from "../components/episodeQueries";
import { useProjects } from "../components/projectQueries";
import { HealthDot } from "./HealthDot";
import "./shell.css";

/** Switch to another project's page, keeping the person's place in the app otherwise. */
function ProjectSwitcher() {
  const projects = useProjects();
  const projectMatch = useMatch("/projects/:projectId/*");
  const episodeMatch = useMatch("/episodes/:episodeId");
  // On an episode page the project comes from the episode (the page loads it; this shares the query).
  const episode = useEpisode(episodeMatch ? Number(episodeMatch.params.episodeId) : Number.NaN);
  const navigate = useNavigate();
  if (!projects.data || projects.data.length === 0) return null;
  const current = projectMatch?.params.projectId ?? (episode.data ? String(episode.data.project) : "");

  return (
    <label className="project-switcher">
      <span className="visually-hidden">Project</span>
      <select
        aria-label="Switch project"
        value={current}
        onChange={(e) => e.target.value && navigate(`/projects/${e.target.value}`)}
      >
        <option value="">All projects</option>
        {projects.data.map((p) => (
          <option key={p.id} value={String(p.id)}>
            {p.name}
          </option>
        ))}
      </select>
    </label>
  );
}

/** The frame of every logged-in page: header (brand, project switcher, health, user) and content. */
export function Layout() {
  const { user } = useSession();
  const logout = useLogout();
  const navigate = useNavigate();

  return (
    <div className="app">
      <header className="app-header">
        <Link to="/" className="brand">
          <span className="brand-mark" aria-hidden="true" />
          Loupe
        </Link>
        <ProjectSwitcher />
        <div className="header-spacer" />
        <HealthDot />
        {user?.is_staff && (
          <Link to="/status" className="header-link" data-testid="status-link">
            Status
          </Link>
        )}
        {user && (
          <span className="header-user" data-testid="current-user">
            {user.username}
            {user.is_staff && <span className="badge role-admin">staff</span>}
          </span>
        )}
        <button
          type="button"
          className="button subtle"
          data-testid="logout"
          disabled={logout.isPending}
          onClick={() => logout.mutate(undefined, { onSuccess: () => navigate("/login", { replace: true }) })}
        >
          {logout.isPending ? "Logging out…" : "Log out"}
        </button>
      </header>
      {logout.error && (
        <div className="banner banner-error banner-global" role="alert">
          Could not log out: {logout.error.message}
        </div>
      )}
      <Outlet />
    </div>
  );
}
