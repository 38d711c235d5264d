import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, type ReactNode, useState } from "react";
import {
  type Split,
  taskCatalogue,
  taskCreate,
  taskKeys,
  type TaskSpec,
  taskUpdate,
  type TaskWrite,
} from "../api/tasks";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field, type FieldControl } from "../components/Field";
import { Spinner } from "../components/Spinner";
import { useServerErrors } from "../components/useServerErrors";
import {
  ANY_URL_LIMITS,
  type AnyUrlForm,
  CHECK_TYPES,
  type CheckType,
  type EditorKind,
  JSON_EXAMPLES,
  type UrlMatch,
  anyUrlDefinition,
  anyUrlErrors,
  anyUrlForm,
  anyUrlProblems,
  editorFor,
  emptyAnyUrl,
  parseDefinition,
} from "./definitions";

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

/** The fields whose server messages the editor shows beside them (the banner repeats none of them). */
const COMMON_FIELDS = ["split", "max_steps", "seed_start", "seed_end", "env_kind", "task_name", "definition"] as const;
const ANY_URL_FIELDS: (keyof AnyUrlForm)[] = ["task_id", "start_url", "instruction", "check_url", "match", "selector",
  "must_include"];

/**
 * Create a task (any kind) or edit one. Shipped tasks are chosen from the server's list; an any-URL
 * task is a form; OSWorld and WebArena tasks are their JSON. The server's loaders check the task and
 * their message shows beside what it is about.
 */
export function TaskEditor({ projectId, task, onDone }: { projectId: number; task?: TaskSpec; onDone: () => void }) {
  const client = useQueryClient();
  const catalogue = useQuery({ queryKey: taskKeys.catalogue(), queryFn: ({ signal }) => taskCatalogue(signal) });
  const [editor, setEditor] = useState<EditorKind>(task ? editorFor(task) : "shipped");
  const [envKind, setEnvKind] = useState(task?.env_kind ?? "miniwob");
  const [taskName, setTaskName] = useState(task?.task_name ?? "");
  const [anyUrl, setAnyUrl] = useState<AnyUrlForm>(
    () => (task && anyUrlForm(task.definition)) || emptyAnyUrl(window.location.origin),
  );
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
      client.invalidateQueries({ queryKey: taskKeys.list(projectId) });
      onDone();
    },
  });
  // each server message beside the field it is about, gone once that field is changed
  const server = useServerErrors(save.error, editor === "any_url" ? anyUrlErrors : undefined);
  const errors = server.errors;
  // what the page can tell before sending: live, so it goes as soon as the value is fixed
  const local = editor === "any_url" ? anyUrlProblems(anyUrl) : {};
  const localCount = Object.keys(local).length;
  const problemsOf = (name: keyof AnyUrlForm) => [local[name], ...(errors[name] ?? [])].filter((p): p is string => Boolean(p));
  const number = (value: string) => (value === "" ? Number.NaN : Number(value));
  const setField = <K extends keyof AnyUrlForm>(key: K, value: AnyUrlForm[K]) => {
    setAnyUrl((form) => ({ ...form, [key]: value }));
    server.clear(key);
  };
  const setCommonField = <K extends keyof Common>(key: K, value: Common[K]) => {
    setCommon((c) => ({ ...c, [key]: value }));
    server.clear(key);
  };
  /** One field of the any-URL form: its label, its control, its counter and every message about it. */
  const anyUrlField = (name: keyof AnyUrlForm, label: string, control: (props: FieldControl) => ReactNode,
    { help, className }: { help?: ReactNode; className?: string } = {}) => {
    const kind = ANY_URL_LIMITS[name]; // counted as it is sent: trimmed
    return (
      <Field
        label={label}
        help={help}
        className={className}
        problems={problemsOf(name)}
        limit={kind ? { kind, value: anyUrl[name].trim() } : undefined}
        testId={`anyurl-field-${name}`}
      >
        {control}
      </Field>
    );
  };
  /** One text field of the any-URL form. */
  const textField = (
    name: "task_id" | "start_url" | "check_url" | "selector",
    label: string,
    input: { testId?: string; placeholder?: string; required?: boolean; help?: string } = {},
  ) =>
    anyUrlField(
      name,
      label,
      (props) => (
        <input
          {...props}
          value={anyUrl[name]}
          data-testid={input.testId}
          required={input.required}
          placeholder={input.placeholder}
          onChange={(e) => setField(name, e.target.value)}
        />
      ),
      { help: input.help },
    );

  const kinds = catalogue.data ?? [];
  const shippedKind = kinds.find((k) => k.kind === envKind);
  const shippedTask = shippedKind?.tasks.find((t) => t.name === taskName);

  function submit(event: FormEvent) {
    event.preventDefault();
    setJsonError(null);
    if (localCount > 0) return; // said beside the fields already; nothing to send yet
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
  const jsonEditor = editor === "osworld" || editor === "webarena";
  const besideFields = [...COMMON_FIELDS, ...(editor === "any_url" ? ANY_URL_FIELDS : [])];
  const unplaced = editor === "any_url" ? (errors.definition ?? []) : []; // about the any-URL JSON, no one field
  return (
    <form className="card" onSubmit={submit} aria-label={title} data-testid="task-editor">
      <div className="section-header">
        <h2 className="typed-name">{title}</h2>
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
      <div className="form-grid">
        {editor === "shipped" && (
          <>
            {catalogue.isPending && <Spinner label="Loading the shipped tasks…" />}
            {catalogue.isError && <ErrorBanner error={catalogue.error} onRetry={() => catalogue.refetch()} />}
            <Field label="Environment" problems={errors.env_kind}>
              {(control) => (
                <select
                  {...control}
                  value={envKind}
                  disabled={Boolean(task)}
                  data-testid="shipped-kind"
                  onChange={(e) => {
                    setEnvKind(e.target.value);
                    setTaskName("");
                    server.clear("env_kind", "task_name");
                  }}
                >
                  {(kinds.length ? kinds.map((k) => k.kind) : [envKind]).map((kind) => (
                    <option key={kind} value={kind}>
                      {kind}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            <Field
              label="Task"
              help={shippedTask?.description ? <span data-testid="shipped-description">{shippedTask.description}</span> : undefined}
              problems={[shippedKind?.error ?? "", ...(errors.task_name ?? [])]}
            >
              {(control) => (
                <select
                  {...control}
                  value={taskName}
                  disabled={Boolean(task)}
                  data-testid="shipped-task"
                  required
                  onChange={(e) => {
                    setTaskName(e.target.value);
                    server.clear("task_name");
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
              )}
            </Field>
          </>
        )}
        {editor === "any_url" && (
          <>
            <p className="muted small span-2">
              A task on your team's own web app: the agent starts at the address, follows the instruction, and the
              check decides whether it succeeded.
            </p>
            {textField("task_id", "Task id", {
              testId: "anyurl-id",
              required: true,
              placeholder: "settings-notifications-off",
              help: "Lowercase letters a-z, digits, - and _; it names the task everywhere.",
            })}
            {textField("start_url", "Start URL", { testId: "anyurl-start", required: true })}
            {anyUrlField(
              "instruction",
              "Instruction",
              (props) => (
                <textarea
                  {...props}
                  rows={2}
                  value={anyUrl.instruction}
                  data-testid="anyurl-instruction"
                  required
                  onChange={(e) => setField("instruction", e.target.value)}
                />
              ),
              { className: "span-2" },
            )}
            <Field label="Check">
              {(control) => (
                <select
                  {...control}
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
              )}
            </Field>
            {anyUrl.check_type === "url_match" && (
              <>
                {textField("check_url", "Address to reach", { testId: "anyurl-check-url", required: true })}
                {anyUrlField("match", "Match", (props) => (
                  <select {...props} value={anyUrl.match} onChange={(e) => setField("match", e.target.value as UrlMatch)}>
                    <option value="exact">the whole address</option>
                    <option value="prefix">starts with it</option>
                    <option value="contains">contains it</option>
                  </select>
                ))}
              </>
            )}
            {anyUrl.check_type === "dom_content" && (
              <>
                {textField("selector", "CSS selector", { testId: "anyurl-selector", required: true, placeholder: "#status" })}
                {textField("check_url", "Page to read (empty: where the episode ends)")}
                {anyUrlField(
                  "must_include",
                  "Texts it must show (one a line)",
                  (props) => (
                    <textarea
                      {...props}
                      rows={3}
                      value={anyUrl.must_include}
                      data-testid="anyurl-must-include"
                      onChange={(e) => setField("must_include", e.target.value)}
                    />
                  ),
                  { className: "span-2" },
                )}
              </>
            )}
            {(anyUrl.check_type === "judge" || anyUrl.check_type === "person") && (
              <p className="muted small span-2">
                No automatic reward: {anyUrl.check_type === "judge" ? "the judge model" : "a reviewer"} decides
                whether the episode succeeded.
              </p>
            )}
            {unplaced.length > 0 && (
              <span className="field-error span-2 typed-text" data-testid="anyurl-other-errors">
                {unplaced.join(" ")}
              </span>
            )}
          </>
        )}
        {jsonEditor && (
          <Field
            className="span-2"
            label={
              editor === "osworld"
                ? "OSWorld task (desktop): its JSON, as in OSWorld's evaluation_examples"
                : "WebArena task (webapp), or an any-URL task: its JSON"
            }
            problems={jsonError ? [jsonError] : errors.definition}
            testId="definition-field"
          >
            {(control) => (
              <textarea
                {...control}
                className="mono"
                rows={14}
                value={jsonText}
                spellCheck={false}
                data-testid="definition-json"
                placeholder={JSON_EXAMPLES[editor]}
                onChange={(e) => {
                  setJsonText(e.target.value);
                  setJsonError(null);
                  server.clear("definition");
                }}
              />
            )}
          </Field>
        )}
        <Field label="Split" problems={errors.split}>
          {(control) => (
            <select {...control} value={common.split} onChange={(e) => setCommonField("split", e.target.value as Split)}>
              <option value="train">train</option>
              <option value="eval">eval (held out for measuring checkpoints)</option>
            </select>
          )}
        </Field>
        {!jsonEditor || task ? (
          <Field label="Max steps" problems={errors.max_steps}>
            {(control) => (
              <input
                {...control}
                type="number"
                min={1}
                max={200}
                value={common.max_steps}
                onChange={(e) => setCommonField("max_steps", number(e.target.value))}
              />
            )}
          </Field>
        ) : (
          <p className="muted small">Max steps: the task's own (WebArena's max_steps, or 15 for a desktop task).</p>
        )}
        <Field label="First seed" problems={errors.seed_start}>
          {(control) => (
            <input
              {...control}
              type="number"
              min={0}
              value={common.seed_start}
              onChange={(e) => {
                setCommonField("seed_start", number(e.target.value));
                server.clear("seed_end"); // the range's message is about both ends
              }}
            />
          )}
        </Field>
        <Field label="Last seed" problems={errors.seed_end}>
          {(control) => (
            <input
              {...control}
              type="number"
              min={0}
              value={common.seed_end}
              onChange={(e) => {
                setCommonField("seed_end", number(e.target.value));
                server.clear("seed_start");
              }}
            />
          )}
        </Field>
      </div>
      {/* beside the button that sent it: what no field shows, or where to look */}
      {save.error && (
        <ErrorBanner
          error={save.error}
          fieldErrors={errors}
          besideFields={besideFields}
          title={task ? "Could not save the task" : "Could not add the task"}
        />
      )}
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={save.isPending || localCount > 0} data-testid="task-save">
          {save.isPending ? "Saving…" : task ? "Save" : "Add task"}
        </button>
        <button type="button" className="button subtle" onClick={onDone} disabled={save.isPending}>
          Cancel
        </button>
        {localCount > 0 && (
          // where to look, not the messages again: each is beside its field
          <span className="field-error" data-testid="task-fix-first">
            {localCount === 1 ? "One field above says what to fix first." : `${localCount} fields above say what to fix first.`}
          </span>
        )}
      </div>
    </form>
  );
}
