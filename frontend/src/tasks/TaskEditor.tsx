import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { ApiError } from "../api/client";
import { taskCatalogue, taskCreate, taskUpdate, type TaskWrite } from "../api/tasks";
import type { Split, TaskSpec } from "../api/types";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { tasksKey } from "../components/projectQueries";
import {
  type AnyUrlForm,
  CHECK_TYPES,
  type CheckType,
  EMPTY_ANY_URL,
  type EditorKind,
  JSON_EXAMPLES,
  type UrlMatch,
  anyUrlDefinition,
  anyUrlFieldOf,
  anyUrlForm,
  editorFor,
  parseDefinition,
} from "./definitions";

export const CATALOGUE_KEY = ["tasks", "catalogue"] as const;

const EDITORS: { value: EditorKind; label: string }[] = [
  { value: "shipped", label: "Shipped task" },
  { value: "any_url", label: "Any URL" },
  { value: "osworld", label: "OSWorld JSON" },
  { value: "webarena", label: "WebArena JSON" },
];

interface Common {
  split: Split;
  seed_start: number;
  seed_end: number;
  max_steps: number;
}

function FieldError({ messages }: { messages?: string[] }) {
  return messages && messages.length > 0 ? <span className="field-error">{messages.join(" ")}</span> : null;
}

/**
 * Create a task (any kind) or edit one. Shipped tasks are chosen from the server's list; an any-URL
 * task is a form; OSWorld and WebArena tasks are their JSON. The server's loaders check the task and
 * their message shows beside what it is about.
 */
export function TaskEditor({ projectId, task, onDone }: { projectId: number; task?: TaskSpec; onDone: () => void }) {
  const client = useQueryClient();
  const catalogue = useQuery({ queryKey: CATALOGUE_KEY, queryFn: ({ signal }) => taskCatalogue(signal) });
  const [editor, setEditor] = useState<EditorKind>(task ? editorFor(task) : "shipped");
  const [envKind, setEnvKind] = useState(task?.env_kind ?? "miniwob");
  const [taskName, setTaskName] = useState(task?.task_name ?? "");
  const [anyUrl, setAnyUrl] = useState<AnyUrlForm>((task && anyUrlForm(task.definition)) || EMPTY_ANY_URL);
  const [jsonText, setJsonText] = useState(task?.definition != null ? JSON.stringify(task.definition, null, 2) : "");
  const [jsonError, setJsonError] = useState<string | null>(null);
  const [common, setCommon] = useState<Common>({
    split: task?.split ?? "train",
    seed_start: task?.seed_start ?? 0,
    seed_end: task?.seed_end ?? 999,
    max_steps: task?.max_steps ?? 10,
  });

  const save = useMutation({
    mutationFn: (body: TaskWrite) => (task ? taskUpdate(projectId, task.id, body) : taskCreate(projectId, body)),
    onSuccess: () => {
      client.invalidateQueries({ queryKey: tasksKey(projectId) });
      onDone();
    },
  });
  const errors = save.error instanceof ApiError ? save.error.fieldErrors : {};
  const definitionErrors = errors.definition ?? [];
  const anyUrlField = definitionErrors.length ? anyUrlFieldOf(definitionErrors[0]) : null;
  const fieldErrors = (name: keyof AnyUrlForm) => (anyUrlField === name ? definitionErrors : undefined);
  const number = (value: string) => (value === "" ? Number.NaN : Number(value));
  const setField = <K extends keyof AnyUrlForm>(key: K, value: AnyUrlForm[K]) =>
    setAnyUrl((form) => ({ ...form, [key]: value }));
  /** One text field of the any-URL form: its label, its input and the loader's message about it. */
  const textField = (
    name: "task_id" | "start_url" | "check_url" | "selector",
    label: string,
    input: { testId?: string; placeholder?: string; required?: boolean; flagInvalid?: boolean } = {},
  ) => (
    <label className="field">
      <span>{label}</span>
      <input
        value={anyUrl[name]}
        data-testid={input.testId}
        required={input.required}
        placeholder={input.placeholder}
        aria-invalid={input.flagInvalid ? anyUrlField === name : undefined}
        onChange={(e) => setField(name, e.target.value)}
      />
      <FieldError messages={fieldErrors(name)} />
    </label>
  );

  const kinds = catalogue.data ?? [];
  const shippedKind = kinds.find((k) => k.kind === envKind);
  const shippedTask = shippedKind?.tasks.find((t) => t.name === taskName);

  function submit(event: FormEvent) {
    event.preventDefault();
    setJsonError(null);
    const body: TaskWrite = { split: common.split, seed_start: common.seed_start, seed_end: common.seed_end };
    if (editor === "shipped") {
      if (!task) Object.assign(body, { env_kind: envKind, task_name: taskName });
      body.max_steps = common.max_steps;
    } else if (editor === "any_url") {
      Object.assign(body, { env_kind: "webapp", definition: anyUrlDefinition(anyUrl, common.max_steps) });
      body.max_steps = common.max_steps;
    } else {
      const parsed = parseDefinition(jsonText);
      if (!parsed.ok) {
        setJsonError(parsed.error);
        return;
      }
      Object.assign(body, { env_kind: editor === "osworld" ? "desktop" : "webapp", definition: parsed.value });
      if (task) body.max_steps = common.max_steps;
    }
    if (task) delete body.env_kind;
    save.mutate(body);
  }

  const title = task ? `Edit ${task.task_name}` : "New task";
  return (
    <form className="card" onSubmit={submit} aria-label={title} data-testid="task-editor">
      <div className="section-header">
        <h2>{title}</h2>
      </div>
      {!task && (
        <div className="tabs" role="tablist" aria-label="What kind of task">
          {EDITORS.map((e) => (
            <button
              key={e.value}
              type="button"
              role="tab"
              aria-selected={editor === e.value}
              className={editor === e.value ? "tab active" : "tab"}
              data-testid={`editor-${e.value}`}
              onClick={() => {
                setEditor(e.value);
                save.reset();
                setJsonError(null);
              }}
            >
              {e.label}
            </button>
          ))}
        </div>
      )}
      {save.error && !(definitionErrors.length > 0 && editor !== "shipped") && (
        <ErrorBanner
          error={save.error}
          fieldErrors={{}}
          title={task ? "Could not save the task" : "Could not add the task"}
        />
      )}
      <div className="form-grid">
        {editor === "shipped" && (
          <>
            {catalogue.isPending && <Spinner label="Loading the shipped tasks…" />}
            {catalogue.isError && <ErrorBanner error={catalogue.error} onRetry={() => catalogue.refetch()} />}
            <label className="field">
              <span>Environment</span>
              <select
                value={envKind}
                disabled={Boolean(task)}
                data-testid="shipped-kind"
                onChange={(e) => {
                  setEnvKind(e.target.value);
                  setTaskName("");
                }}
              >
                {(kinds.length ? kinds.map((k) => k.kind) : [envKind]).map((kind) => (
                  <option key={kind} value={kind}>
                    {kind}
                  </option>
                ))}
              </select>
              <FieldError messages={errors.env_kind} />
            </label>
            <label className="field">
              <span>Task</span>
              <select
                value={taskName}
                disabled={Boolean(task)}
                data-testid="shipped-task"
                required
                onChange={(e) => {
                  setTaskName(e.target.value);
                  const chosen = shippedKind?.tasks.find((t) => t.name === e.target.value);
                  if (chosen) setCommon((c) => ({ ...c, max_steps: chosen.max_steps })); // the task's own budget
                }}
              >
                <option value="">Choose a task…</option>
                {task && <option value={task.task_name}>{task.task_name}</option>}
                {!task &&
                  shippedKind?.tasks.map((t) => (
                    <option key={t.name} value={t.name}>
                      {t.name}
                    </option>
                  ))}
              </select>
              {shippedTask?.description && (
                <span className="muted small" data-testid="shipped-description">
                  {shippedTask.description}
                </span>
              )}
              {shippedKind?.error && <span className="field-error">{shippedKind.error}</span>}
              <FieldError messages={errors.task_name} />
            </label>
          </>
        )}
        {editor === "any_url" && (
          <>
            <p className="muted small span-2">
              A task on your team's own web app: the agent starts at the address, follows the instruction, and the
              check decides whether it succeeded.
            </p>
            {textField("task_id", "Task id", { testId: "anyurl-id", required: true, placeholder: "settings-notifications-off" })}
            {textField("start_url", "Start URL", { testId: "anyurl-start", required: true, flagInvalid: true })}
            <label className="field span-2">
              <span>Instruction</span>
              <textarea
                rows={2}
                value={anyUrl.instruction}
                data-testid="anyurl-instruction"
                required
                onChange={(e) => setField("instruction", e.target.value)}
              />
              <FieldError messages={fieldErrors("instruction")} />
            </label>
            <label className="field">
              <span>Check</span>
              <select
                value={anyUrl.check_type}
                data-testid="anyurl-check"
                onChange={(e) => setField("check_type", e.target.value as CheckType)}
              >
                {CHECK_TYPES.map((c) => (
                  <option key={c.value} value={c.value}>
                    {c.label}
                  </option>
                ))}
              </select>
            </label>
            {anyUrl.check_type === "url_match" && (
              <>
                {textField("check_url", "Address to reach", { testId: "anyurl-check-url", required: true })}
                <label className="field">
                  <span>Match</span>
                  <select value={anyUrl.match} onChange={(e) => setField("match", e.target.value as UrlMatch)}>
                    <option value="exact">the whole address</option>
                    <option value="prefix">starts with it</option>
                    <option value="contains">contains it</option>
                  </select>
                  <FieldError messages={fieldErrors("match")} />
                </label>
              </>
            )}
            {anyUrl.check_type === "dom_content" && (
              <>
                {textField("selector", "CSS selector", { testId: "anyurl-selector", required: true, placeholder: "#status" })}
                {textField("check_url", "Page to read (empty: where the episode ends)")}
                <label className="field span-2">
                  <span>Texts it must show (one a line)</span>
                  <textarea
                    rows={3}
                    value={anyUrl.must_include}
                    data-testid="anyurl-must-include"
                    onChange={(e) => setField("must_include", e.target.value)}
                  />
                  <FieldError messages={fieldErrors("must_include")} />
                </label>
              </>
            )}
            {(anyUrl.check_type === "judge" || anyUrl.check_type === "person") && (
              <p className="muted small span-2">
                No automatic reward: {anyUrl.check_type === "judge" ? "the judge model" : "a reviewer"} decides
                whether the episode succeeded.
              </p>
            )}
            {anyUrlField === null && definitionErrors.length > 0 && (
              <span className="field-error span-2">{definitionErrors.join(" ")}</span>
            )}
          </>
        )}
        {(editor === "osworld" || editor === "webarena") && (
          <label className="field span-2">
            <span>
              {editor === "osworld"
                ? "OSWorld task (desktop): its JSON, as in OSWorld's evaluation_examples"
                : "WebArena task (webapp), or an any-URL task: its JSON"}
            </span>
            <textarea
              className="mono"
              rows={14}
              value={jsonText}
              spellCheck={false}
              data-testid="definition-json"
              placeholder={JSON_EXAMPLES[editor]}
              aria-invalid={Boolean(jsonError || definitionErrors.length)}
              onChange={(e) => setJsonText(e.target.value)}
            />
            <FieldError messages={jsonError ? [jsonError] : definitionErrors} />
          </label>
        )}
        <label className="field">
          <span>Split</span>
          <select value={common.split} onChange={(e) => setCommon({ ...common, split: e.target.value as Split })}>
            <option value="train">train</option>
            <option value="eval">eval (held out for measuring checkpoints)</option>
          </select>
          <FieldError messages={errors.split} />
        </label>
        {(editor !== "osworld" && editor !== "webarena") || task ? (
          <label className="field">
            <span>Max steps</span>
            <input
              type="number"
              min={1}
              max={200}
              value={common.max_steps}
              onChange={(e) => setCommon({ ...common, max_steps: number(e.target.value) })}
            />
            <FieldError messages={errors.max_steps} />
          </label>
        ) : (
          <p className="muted small">Max steps: the task's own (WebArena's max_steps, or 15 for a desktop task).</p>
        )}
        <label className="field">
          <span>First seed</span>
          <input
            type="number"
            min={0}
            value={common.seed_start}
            onChange={(e) => setCommon({ ...common, seed_start: number(e.target.value) })}
          />
          <FieldError messages={errors.seed_start} />
        </label>
        <label className="field">
          <span>Last seed</span>
          <input
            type="number"
            min={0}
            value={common.seed_end}
            onChange={(e) => setCommon({ ...common, seed_end: number(e.target.value) })}
          />
          <FieldError messages={errors.seed_end} />
        </label>
      </div>
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={save.isPending} data-testid="task-save">
          {save.isPending ? "Saving…" : task ? "Save" : "Add task"}
        </button>
        <button type="button" className="button subtle" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
      </div>
    </form>
  );
}
