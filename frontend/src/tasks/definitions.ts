/**
 * Task definitions as the Tasks page edits them: an any-URL task's form and the JSON it stands for
 * (agent/envs/webapp/tasks.py), which editor a task opens in, and where a server message about a
 * definition belongs. Pure functions; the server's loaders decide what is valid.
 */
import type { TaskSpec } from "../api/types";

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

export const EMPTY_ANY_URL: AnyUrlForm = {
  task_id: "",
  start_url: "http://127.0.0.1:8000/",
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
  if (/check\.url/.test(message)) return "check_url";
  if (/start_url/.test(message)) return "start_url";
  if (/selector/.test(message)) return "selector";
  if (/must_include/.test(message)) return "must_include";
  if (/check\.match/.test(message)) return "match";
  if (/instruction/.test(message)) return "instruction";
  if (/task_id/.test(message)) return "task_id";
  return null;
}
