/**
 * Task definitions as the Tasks page edits them: an any-URL task's form and the JSON it stands for
 * (agent/envs/webapp/tasks.py), which editor a task opens in, and where a server message about a
 * definition belongs. Pure functions; the server's loaders decide what is valid.
 */
import type { FieldErrors } from "../api/client";
import type { TaskSpec } from "../api/tasks";
import { LIMITS, type LimitKind, isOverLimit } from "../components/limits";

export type CheckType = "url_match" | "dom_content" | "judge" | "person";
export type UrlMatch = "exact" | "prefix" | "contains";
/** The editors of the Tasks page: a shipped task from the list, the any-URL form, or a JSON file's text. */
export type EditorKind = "shipped" | "any_url" | "osworld" | "webarena";

export const CHECK_TYPES: { value: CheckType; label: string }[] = [
  { value: "url_match", label: "The page's address (url_match)" },
  { value: "dom_content", label: "Text on the page (dom_content)" },
  { value: "judge", label: "The judge model decides (judge)" },
  { value: "person", label: "A person decides on review (person)" },
];

/** What the JSON editors show while empty: one small task of each format. */
export const JSON_EXAMPLES: Record<"osworld" | "webarena", string> = {
  osworld: `{
  "id": "my-desktop-task",
  "instruction": "Create a file notes.txt in the home folder.",
  "config": [],
  "evaluator": {
    "func": "check_include_exclude",
    "result": {"type": "vm_command_line", "command": "ls ~"},
    "expected": {"type": "rule", "rules": {"include": ["notes.txt"]}}
  }
}`,
  webarena: `{
  "task_id": "my-shop-task",
  "intent": "Put a \\"Bluetooth Speaker\\" in the basket.",
  "start_url": "__SHOP__/catalogue/",
  "eval": {"eval_types": ["site_state"], "site_state": [{"check": "basket_line", "product": "Bluetooth Speaker"}]}
}`,
};

export interface AnyUrlForm {
  task_id: string;
  start_url: string;
  instruction: string;
  check_type: CheckType;
  /** url_match: the address to reach; dom_content: the page to read ("" for the page the episode ends on). */
  check_url: string;
  match: UrlMatch;
  selector: string;
  /** dom_content: the texts the selected elements must show, one a line. */
  must_include: string;
}

/**
 * A task id is a slug: lowercase ASCII letters, digits, '-' and '_', starting with a letter or a digit (the server's
 * flywheel/task_authoring.py TASK_ID; tests/projects/test_task_authoring.py keeps the two equal). Other scripts and
 * markup are refused, never rewritten.
 */
export const TASK_ID = /^[a-z0-9][a-z0-9_-]*$/;
const TASK_ID_RULE = "lowercase letters a-z, digits, '-' and '_', starting with a letter or a digit";

/** What is wrong with a task id, as the server says it; null when it is a fine one. */
export function taskIdProblem(taskId: string): string | null {
  if (!taskId) return "The task id is empty; give the task an id such as settings-notifications-off.";
  const shown = taskId.length <= 60 ? taskId : `${taskId.slice(0, 60)}…`;
  if (isOverLimit("task_id", taskId)) {
    return `The task id '${shown}' is ${taskId.length.toLocaleString("en")} characters long; the limit is ${LIMITS.task_id}.`;
  }
  if (!TASK_ID.test(taskId)) return `The task id '${shown}' may hold only ${TASK_ID_RULE} (like settings-notifications-off).`;
  return null;
}

/** The any-URL form's fields that have a length limit, and which. */
export const ANY_URL_LIMITS: Partial<Record<keyof AnyUrlForm, LimitKind>> = { task_id: "task_id", instruction: "task_instruction" };

/**
 * What the page can tell about the any-URL form before sending it: the id's form and the instruction's length, by
 * field (the server's loader checks the rest). Computed from the current values, so a problem goes as soon as it is
 * fixed.
 */
export function anyUrlProblems(form: AnyUrlForm): Partial<Record<keyof AnyUrlForm, string>> {
  const problems: Partial<Record<keyof AnyUrlForm, string>> = {};
  const id = form.task_id.trim();
  if (id) {
    const problem = taskIdProblem(id);
    if (problem) problems.task_id = problem;
  }
  if (isOverLimit("task_instruction", form.instruction.trim())) {
    const length = form.instruction.trim().length.toLocaleString("en");
    problems.instruction = `The instruction is ${length} characters long; the limit is ${LIMITS.task_instruction.toLocaleString("en")}.`;
  }
  return problems;
}

/** An empty any-URL form; its start address is this server's own (the page's origin), not a fixed port. */
export function emptyAnyUrl(origin: string): AnyUrlForm {
  return { ...EMPTY_ANY_URL, start_url: `${origin.replace(/\/+$/, "")}/` };
}

export const EMPTY_ANY_URL: AnyUrlForm = {
  task_id: "",
  start_url: "",
  instruction: "",
  check_type: "url_match",
  check_url: "",
  match: "exact",
  selector: "",
  must_include: "",
};

/** The any-URL task JSON the form stands for (only the check type's own fields). */
export function anyUrlDefinition(form: AnyUrlForm, maxSteps?: number): Record<string, unknown> {
  const check: Record<string, unknown> = { type: form.check_type };
  if (form.check_type === "url_match") {
    check.url = form.check_url.trim();
    check.match = form.match;
  } else if (form.check_type === "dom_content") {
    check.url = form.check_url.trim() || "last";
    check.selector = form.selector.trim();
    check.must_include = form.must_include
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean);
  }
  const definition: Record<string, unknown> = {
    task_id: form.task_id.trim(),
    start_url: form.start_url.trim(),
    instruction: form.instruction.trim(),
    check,
  };
  if (maxSteps !== undefined && Number.isFinite(maxSteps)) definition.max_steps = maxSteps;
  return definition;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The form for an any-URL task's JSON; null when the JSON is not one the form can show whole. */
export function anyUrlForm(definition: unknown): AnyUrlForm | null {
  if (!isObject(definition) || !isObject(definition.check) || "intent" in definition || "eval" in definition) {
    return null;
  }
  const known = new Set(["task_id", "start_url", "instruction", "check", "max_steps"]);
  if (Object.keys(definition).some((key) => !known.has(key))) return null;
  const check = definition.check;
  const type = check.type as CheckType;
  if (!CHECK_TYPES.some((c) => c.value === type)) return null;
  const texts = Array.isArray(check.must_include) ? check.must_include.map(String) : [];
  return {
    task_id: String(definition.task_id ?? ""),
    start_url: String(definition.start_url ?? ""),
    instruction: String(definition.instruction ?? ""),
    check_type: type,
    check_url: check.url === "last" || check.url === undefined ? "" : String(check.url),
    match: (["exact", "prefix", "contains"].includes(String(check.match)) ? check.match : "exact") as UrlMatch,
    selector: String(check.selector ?? ""),
    must_include: texts.join("\n"),
  };
}

/** Which editor opens a task: shipped ones pick from the list; an any-URL JSON opens in its form. */
export function editorFor(task: Pick<TaskSpec, "env_kind" | "definition">): EditorKind {
  if (task.definition == null) return "shipped";
  if (task.env_kind === "desktop") return "osworld";
  return anyUrlForm(task.definition) ? "any_url" : "webarena";
}

export type Parsed = { ok: true; value: unknown } | { ok: false; error: string };

/** The JSON in an editor, or what is wrong with it, said plainly. */
export function parseDefinition(text: string): Parsed {
  if (!text.trim()) return { ok: false, error: "Paste or write the task's JSON first." };
  try {
    const value: unknown = JSON.parse(text);
    if (!isObject(value)) return { ok: false, error: "A task is one JSON object ({ ... }), not a list or a value." };
    return { ok: true, value };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { ok: false, error: `This is not valid JSON: ${reason}` };
  }
}

/** The any-URL form field a server message about the definition names (shown beside it), or null. */
export function anyUrlFieldOf(message: string): keyof AnyUrlForm | null {
  // the server's own checks (flywheel/task_authoring.py) say which field first, the loader's name its JSON key
  if (/^(\S+: )?The task id\b/.test(message)) return "task_id";
  if (/^(\S+: )?The instruction\b/.test(message)) return "instruction";
  if (/check\.url/.test(message)) return "check_url";
  if (/start_url/.test(message)) return "start_url";
  if (/selector/.test(message)) return "selector";
  if (/must_include/.test(message)) return "must_include";
  if (/check\.match/.test(message)) return "match";
  if (/instruction/.test(message)) return "instruction";
  if (/task_id/.test(message)) return "task_id";
  return null;
}

/**
 * The server's field errors with its messages about an any-URL definition moved to the form field each names (by
 * that field's key), so each shows beside its field and goes when that field is changed; the rest stay under
 * `definition`.
 */
export function anyUrlErrors(errors: FieldErrors): FieldErrors {
  const { definition, ...rest } = errors;
  const out: FieldErrors = { ...rest };
  for (const message of definition ?? []) {
    const field = anyUrlFieldOf(message) ?? "definition";
    out[field] = [...(out[field] ?? []), message];
  }
  return out;
}
