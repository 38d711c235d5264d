import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useNavigate } from "react-router";
import { episodeKeys, episodeStart } from "../api/episodes";
import { taskKeys, taskRemove, type TaskSpec } from "../api/tasks";
import { ErrorBanner } from "../components/ErrorBanner";
import { ManagersOnly } from "../components/ManagersOnly";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { canManage } from "../components/permissions";
import { useTasks } from "../components/projectQueries";
import { useIdParam } from "../components/useIdParam";
import { useSession } from "../components/useSession";
import { ProjectFrame } from "../shell/ProjectFrame";
import { ImportPanel } from "./ImportPanel";
import { TaskEditor } from "./TaskEditor";
import { TaskFilesSection } from "./TaskFilesSection";

type Panel = { kind: "new" } | { kind: "edit"; task: TaskSpec } | { kind: "import" } | null;

function TaskManager({ projectId }: { projectId: number }) {
  const tasks = useTasks(projectId);
  const client = useQueryClient();
  const navigate = useNavigate();
  const [panel, setPanel] = useState<Panel>(null);
  const remove = useMutation({
    mutationFn: (taskId: number) => taskRemove(projectId, taskId),
    onSuccess: () => client.invalidateQueries({ queryKey: taskKeys.list(projectId) }),
  });
  // "Try it": one supervised episode on the task's first seed, opened at once on its session page
  const tryIt = useMutation({
    mutationFn: (task: TaskSpec) => episodeStart(projectId, { task: task.id, seeds: [task.seed_start], mode: "supervised" }),
    onSuccess: ({ results }) => {
      client.invalidateQueries({ queryKey: episodeKeys.lists() });
      navigate(`/episodes/${results[0].id}`);
    },
  });

  return (
    <>
      <div className="page-header">
        <h1>Tasks</h1>
        <div className="header-spacer" />
        <button type="button" className="button primary" onClick={() => setPanel({ kind: "new" })} data-testid="task-new">
          New task
        </button>
        <button type="button" className="button" onClick={() => setPanel({ kind: "import" })} data-testid="task-import">
          Import / export
        </button>
      </div>
      <p className="muted">
        What the agent practises and is measured on: shipped tasks, your own web app (any URL), and OSWorld or WebArena
        task files.
      </p>
      {panel?.kind === "new" && <TaskEditor projectId={projectId} onDone={() => setPanel(null)} />}
      {panel?.kind === "edit" && (
        <TaskEditor key={panel.task.id} projectId={projectId} task={panel.task} onDone={() => setPanel(null)} />
      )}
      {panel?.kind === "import" && <ImportPanel projectId={projectId} onDone={() => setPanel(null)} />}
      {tasks.isPending && <Spinner label="Loading tasks…" />}
      {tasks.isError && <ErrorBanner error={tasks.error} onRetry={() => tasks.refetch()} />}
      {tasks.data && (
        <Table
          testId="task-table"
          rows={tasks.data}
          rowKey={(task) => task.id}
          rowProps={(task) => ({ "data-testid": "task-row", "data-task": task.task_name })}
          empty={<p className="empty-state">No tasks yet. Add one, or import a file.</p>}
          columns={[
            {
              header: "Task",
              cellProps: () => ({ className: "task-cell" }),
              cell: (task) => (
                <>
                  <strong>{task.task_name}</strong>
                  {task.instruction_template && (
                    // at most a few lines here: a long instruction is read whole in the editor
                    <div className="muted small task-instruction" title={task.instruction_template.slice(0, 1000)}>
                      {task.instruction_template}
                    </div>
                  )}
                </>
              ),
            },
            { header: "Environment", cell: (task) => task.env_kind },
            {
              header: "Source",
              cell: (task) => <span className="badge">{task.source === "authored" ? "yours" : "shipped"}</span>,
            },
            { header: "Split", cell: (task) => <span className={`badge split-${task.split}`}>{task.split}</span> },
            {
              header: "Seeds",
              cellProps: () => ({ className: "mono" }),
              cell: (task) => (
                <>
                  {task.seed_start}–{task.seed_end}
                </>
              ),
            },
            { header: "Max steps", className: "num", cell: (task) => task.max_steps },
            {
              headerProps: { "aria-label": "Actions" },
              cellProps: () => ({ className: "row-actions" }),
              cell: (task) => (
                <div className="form-actions">
                  <button
                    type="button"
                    className="button small"
                    disabled={tryIt.isPending}
                    data-testid="task-try"
                    title="Start a supervised episode of this task and open it"
                    onClick={() => tryIt.mutate(task)}
                  >
                    {tryIt.isPending && tryIt.variables?.id === task.id ? "Starting…" : "Try it"}
                  </button>
                  <button
                    type="button"
                    className="button subtle small"
                    data-testid="task-edit"
                    onClick={() => setPanel({ kind: "edit", task })}
                  >
                    Edit
                  </button>
                  <button
                    type="button"
                    className="button subtle small danger"
                    disabled={remove.isPending}
                    onClick={() => {
                      if (window.confirm(`Remove task "${task.task_name}"? A task that has episodes cannot be removed.`)) {
                        remove.mutate(task.id);
                      }
                    }}
                  >
                    Remove
                  </button>
                </div>
              ),
            },
          ]}
          // a refusal shows under the row whose button caused it, not at the top of the page
          rowDetail={(task) => {
            const tryFailed = tryIt.error && tryIt.variables?.id === task.id;
            const removeFailed = remove.error && remove.variables === task.id;
            if (!tryFailed && !removeFailed) return null;
            return {
              props: { "data-testid": "task-row-error", "data-task": task.task_name },
              content: (
                <>
                  {tryFailed && <ErrorBanner error={tryIt.error} title="Could not start a try-out episode" />}
                  {removeFailed && <ErrorBanner error={remove.error} title="Could not remove the task" />}
                </>
              ),
            };
          }}
        />
      )}
      <TaskFilesSection projectId={projectId} />
    </>
  );
}

/** `/projects/:projectId/tasks`: create, edit, try, import and export the project's tasks; managers only. */
export function TasksPage() {
  const projectId = useIdParam("projectId");
  const { user } = useSession();
  return (
    <ProjectFrame projectId={projectId} trail={[{ label: "Tasks" }]}>
      {(project) =>
        canManage(project, user) ? (
          <TaskManager projectId={projectId} />
        ) : (
          <ManagersOnly projectId={projectId} title="Tasks" what="create, edit, import and export tasks" />
        )
      }
    </ProjectFrame>
  );
}
