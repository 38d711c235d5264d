import { Link } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { useTasks } from "../components/projectQueries";

/** The project's task specs; managers create, edit, import and try them on the Tasks page. */
export function TasksSection({ projectId, editable }: { projectId: number; editable: boolean }) {
  const tasks = useTasks(projectId);

  return (
    <section aria-labelledby="tasks-title">
      <div className="section-header">
        <h2 id="tasks-title">Tasks</h2>
        <div className="header-spacer" />
        {editable && (
          <Link className="button" to={`/projects/${projectId}/tasks`} data-testid="manage-tasks">
            Manage tasks
          </Link>
        )}
      </div>
      {tasks.isPending && <Spinner label="Loading tasks…" />}
      {tasks.isError && <ErrorBanner error={tasks.error} onRetry={() => tasks.refetch()} />}
      {tasks.data && tasks.data.length === 0 && (
        <p className="empty-state">
          No tasks yet. {editable ? "Add one on the Tasks page to start episodes." : "A project manager adds them."}
        </p>
      )}
      {tasks.data && tasks.data.length > 0 && (
        <div className="table-wrap">
          <table className="table" data-testid="task-table">
            <thead>
              <tr>
                <th>Task</th>
                <th>Environment</th>
                <th>Seeds</th>
                <th>Split</th>
                <th className="num">Max steps</th>
              </tr>
            </thead>
            <tbody>
              {tasks.data.map((task) => (
                <tr key={task.id}>
                  <td className="task-cell">
                    <strong>{task.task_name}</strong>
                    {task.source === "authored" && <> <span className="badge">yours</span></>}
                    {task.instruction_template && (
                      <div className="muted small task-instruction" title={task.instruction_template.slice(0, 1000)}>
                        {task.instruction_template}
                      </div>
                    )}
                  </td>
                  <td>{task.env_kind}</td>
                  <td className="mono">
                    {task.seed_start}–{task.seed_end}
                  </td>
                  <td>
                    <span className={`badge split-${task.split}`}>{task.split}</span>
                  </td>
                  <td className="num">{task.max_steps}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
