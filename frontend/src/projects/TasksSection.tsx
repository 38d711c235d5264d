import { Link } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
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
      {tasks.data && (
        <Table
          testId="task-table"
          rows={tasks.data}
          rowKey={(task) => task.id}
          empty={
            <p className="empty-state">
              No tasks yet. {editable ? "Add one on the Tasks page to start episodes." : "A project manager adds them."}
            </p>
          }
          columns={[
            {
              header: "Task",
              cellProps: () => ({ className: "task-cell" }),
              cell: (task) => (
                <>
                  <strong>{task.task_name}</strong>
                  {task.source === "authored" && <> <span className="badge">yours</span></>}
                  {task.instruction_template && (
                    <div className="muted small task-instruction" title={task.instruction_template.slice(0, 1000)}>
                      {task.instruction_template}
                    </div>
                  )}
                </>
              ),
            },
            { header: "Environment", cell: (task) => task.env_kind },
            {
              header: "Seeds",
              cellProps: () => ({ className: "mono" }),
              cell: (task) => (
                <>
                  {task.seed_start}–{task.seed_end}
                </>
              ),
            },
            { header: "Split", cell: (task) => <span className={`badge split-${task.split}`}>{task.split}</span> },
            { header: "Max steps", className: "num", cell: (task) => task.max_steps },
          ]}
        />
      )}
    </section>
  );
}
