/**
 * Task authoring endpoints (flywheel/api.py tasks, flywheel/api_tasks.py): create and edit tasks with
 * their JSON definitions, the shipped tasks of each env kind, and importing / exporting task files.
 */
import { API_ROOT, apiFetch } from "./client";
import type { Split, TaskSpec } from "./types";

export type TaskFormat = "osworld" | "webarena";

export interface CatalogueTask {
  name: string;
  description: string;
  max_steps: number;
}

export interface CatalogueKind {
  kind: string;
  /** The JSON format its own tasks are written in; null: only shipped tasks. */
  format: TaskFormat | null;
  tasks: CatalogueTask[];
  /** Why its shipped tasks could not be listed; "" when they were. */
  error: string;
}

export interface TaskWrite {
  env_kind?: string;
  task_name?: string;
  /** An authored task's JSON (OSWorld for desktop, WebArena or any-URL for webapp). */
  definition?: unknown;
  instruction_template?: string;
  seed_start?: number;
  seed_end?: number;
  split?: Split;
  max_steps?: number;
}

export const taskCatalogue = (signal?: AbortSignal) =>
  apiFetch<{ kinds: CatalogueKind[] }>("tasks/catalogue", { signal }).then((data) => data.kinds);

export const taskCreate = (projectId: number, task: TaskWrite) =>
  apiFetch<TaskSpec>(`projects/${projectId}/tasks/`, { method: "POST", body: task });

export const taskUpdate = (projectId: number, taskId: number, changes: TaskWrite) =>
  apiFetch<TaskSpec>(`projects/${projectId}/tasks/${taskId}/`, { method: "PATCH", body: changes });

/** Import task files, all or none; a refusal's `fieldErrors.tasks` lists every problem. */
export function taskImport(projectId: number, format: TaskFormat, split: Split, files: File[]) {
  const form = new FormData();
  form.set("format", format);
  form.set("split", split);
  for (const file of files) form.append("files", file, file.name);
  return apiFetch<{ results: TaskSpec[] }>(`projects/${projectId}/tasks/import`, { method: "POST", rawBody: form });
}

/** Where the browser downloads the project's tasks of one format (a JSON file). */
export const taskExportUrl = (projectId: number, format: TaskFormat) =>
  `${API_ROOT}/projects/${projectId}/tasks/export?format=${format}`;
