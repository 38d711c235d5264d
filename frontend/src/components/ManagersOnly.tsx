import { Link } from "react-router";

/** What an annotator sees on a page that only the project's managers may use, and where to go instead. */
export function ManagersOnly({ projectId, title, what }: { projectId: number; title: string; what: string }) {
  return (
    <section className="card empty-state" data-testid="managers-only">
      <h1>{title}</h1>
      <p>
        Only managers of this project can {what}. You are an annotator here; ask a project admin for the manager
        role if you need it.
      </p>
      <p>
        <Link to={`/projects/${projectId}/episodes`}>Go to live sessions</Link>
      </p>
    </section>
  );
}
