import { NavLink } from "react-router";
import { useSession } from "../components/useSession";
import { canManage } from "../components/permissions";
import { useProject } from "../components/projectQueries";

/** The parts of a project, the same on every project page; tasks, review and datasets only for its managers. */
export function ProjectNav({ projectId }: { projectId: number }) {
  const base = `/projects/${projectId}`;
  const project = useProject(projectId);
  const { user } = useSession();
  const manager = canManage(project.data, user);
  const items = [
    { to: base, label: "Overview", end: true },
    { to: `${base}/tasks`, label: "Tasks", end: false, managers: true },
    { to: `${base}/episodes`, label: "Live sessions", end: false },
    { to: `${base}/review`, label: "Review", end: false, managers: true },
    { to: `${base}/datasets`, label: "Datasets", end: false, managers: true },
    { to: `${base}/runs`, label: "Runs", end: false },
    { to: `${base}/cycles`, label: "Cycles", end: false },
  ].filter((item) => manager || !item.managers);
  return (
    <nav className="project-nav" aria-label="Project sections">
      {items.map((item) => (
        <NavLink key={item.to} to={item.to} end={item.end} className={({ isActive }) => (isActive ? "active" : "")}>
          {item.label}
        </NavLink>
      ))}
    </nav>
  );
}
