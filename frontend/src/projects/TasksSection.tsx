import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { ApiError, taskAdd, taskRemove } from "../api/client";
import type { Split, TaskInput, TaskSpec } from "../api/types";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { tasksKey, useTasks } from "../components/projectQueries";

const EMPTY_TASK: TaskInput = {
  env_kind: "miniwob",
  task_name: "",
  instruction_template: "",
  seed_start: 0,
  seed_end: 999,
  split: "train",
  max_steps: 10,
};

function FieldError({ errors, name }: { errors: Record<string, string[]>; name: string }) {
  return errors[name] ? <span className="field-error">{errors[name].join(" ")}</span> : null;
}

function AddTaskForm({ projectId, onDone }: { projectId: number; onDone: () => void }) {
  const client = useQueryClient();
  const [task, setTask] = useState<TaskInput>(EMPTY_TASK);
  const add = useMutation({
    mutationFn: () => taskAdd(projectId, { ...task, task_name: task.task_name.trim() }),
    onSuccess: (created: TaskSpec) => {
      client.setQueryData<TaskSpec[]>(tasksKey(projectId), (old) => [...(old ?? []), created]);
      client.invalidateQueries({ queryKey: tasksKey(projectId) });
      onDone();
    },
  });
  const errors = add.error instanceof ApiError ? add.error.fieldErrors : {};
  const set = <K extends keyof TaskInput>(key: K, value: TaskInput[K]) => setTask((t) => ({ ...t, [key]: value }));
  const number = (value: string) => (value === "" ? Number.NaN : Number(value));

  function submit(event: FormEvent) {
    event.preventDefault();
    add.mutate();
  }

  return (
    <form className="card form-grid" onSubmit={submit} aria-label="Add task">
      {add.error && <ErrorBanner error={add.error} fieldErrors={{}} title="Could not add the task" />}
      <label className="field">
        <span>Environment</span>
        <select value={task.env_kind} onChange={(e) => set("env_kind", e.target.value)}>
          <option value="miniwob">miniwob</option>
          <option value="terminal">terminal</option>
        </select>
        <FieldError errors={errors} name="env_kind" />
      </label>
      <label className="field">
        <span>Task name</span>
        <input
          value={task.task_name}
          onChange={(e) => set("task_name", e.target.value)}
          placeholder="click-button"
          required
        />
        <FieldError errors={errors} name="task_name" />
      </label>
      <label className="field span-2">
        <span>Instruction template (optional)</span>
        <input value={task.instruction_template} onChange={(e) => set("instruction_template", e.target.value)} />
        <FieldError errors={errors} name="instruction_template" />
      </label>
      <label className="field">
        <span>First seed</span>
        <input type="number" min={0} value={task.seed_start} onChange={(e) => set("seed_start", number(e.target.value))} />
        <FieldError errors={errors} name="seed_start" />
      </label>
      <label className="field">
        <span>Last seed</span>
        <input type="number" min={0} value={task.seed_end} onChange={(e) => set("seed_end", number(e.target.value))} />
        <FieldError errors={errors} name="seed_end" />
      </label>
      <label className="field">
        <span>Split</span>
        <select value={task.split} onChange={(e) => set("split", e.target.value as Split)}>
          <option value="train">train</option>
          <option value="eval">eval</option>
        </select>
        <FieldError errors={errors} name="split" />
      </label>
      <label className="field">
        <span>Max steps</span>
        <input type="number" min={1} value={task.max_steps} onChange={(e) => set("max_steps", number(e.target.value))} />
        <FieldError errors={errors} name="max_steps" />
      </label>
      <div className="form-actions span-2">
        <button type="submit" className="button primary" disabled={add.isPending || !task.task_name.trim()}>
          {add.isPending ? "Adding…" : "Add task"}
        </button>
        <button type="button" className="button subtle" onClick={onDone} disabled={add.isPending}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** The project's task specs; managers add and remove them. */
export function TasksSection({ projectId, editable }: { projectId: number; editable: boolean }) {
  const tasks = useTasks(projectId);
  const client = useQueryClient();
  const [adding, setAdding] = useState(false);
  const remove = useMutation({
    mutationFn: (taskId: number) => taskRemove(projectId, taskId),
    onSuccess: () => client.invalidateQueries({ queryKey: tasksKey(projectId) }),
  });

  return (
    <section aria-labelledby="tasks-title">
      <div className="section-header">
        <h2 id="tasks-title">Tasks</h2>
        <div className="header-spacer" />
        {editable && !adding && (
          <button type="button" className="button" onClick={() => setAdding(true)}>
            Add task
          </button>
        )}
      </div>
      {adding && <AddTaskForm projectId={projectId} onDone={() => setAdding(false)} />}
      {remove.error && <ErrorBanner error={remove.error} title="Could not remove the task" />}
      {tasks.isPending && <Spinner label="Loading tasks…" />}
      {tasks.isError && <ErrorBanner error={tasks.error} onRetry={() => tasks.refetch()} />}
      {tasks.data && tasks.data.length === 0 && (
        <p className="empty-state">
          No tasks yet. {editable ? "Add one to start episodes." : "A project manager adds them."}
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
                {editable && <th aria-label="Actions" />}
              </tr>
            </thead>
            <tbody>
              {tasks.data.map((task) => (
                <tr key={task.id}>
                  <td>
                    <strong>{task.task_name}</strong>
                    {task.instruction_template && <div className="muted small">{task.instruction_template}</div>}
                  </td>
                  <td>{task.env_kind}</td>
                  <td className="mono">
                    {task.seed_start}–{task.seed_end}
                  </td>
                  <td>
                    <span className={`badge split-${task.split}`}>{task.split}</span>
                  </td>
                  <td className="num">{task.max_steps}</td>
                  {editable && (
                    <td className="row-actions">
                      <button
                        type="button"
                        className="button subtle small danger"
                        disabled={remove.isPending}
                        onClick={() => {
                          if (window.confirm(`Remove task "${task.task_name}"? Episodes already run keep their data.`)) {
                            remove.mutate(task.id);
                          }
                        }}
                      >
                        Remove
                      </button>
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
