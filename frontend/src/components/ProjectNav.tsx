import { NavLink } from "react-router";

/** The parts of a project, the same on every project page. */
export function ProjectNav({ projectId }: { projectId: number }) {
  const base = `/projects/${projectId}`;
  const items = [
    { to: base, label: "Overview", end: true },
    { to: `${base}/episodes`, label: "Live sessions", end: false },
    { to: `${base}/review`, label: "Review", end: false },
    { to: `${base}/datasets`, label: "Datasets", end: false },
    { to: `${base}/runs`, label: "Runs", end: false },
  ];
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
