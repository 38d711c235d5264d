/**
 * Task authoring endpoints (flywheel/api.py tasks, flywheel/api_tasks.py): create and edit tasks with
 * their JSON definitions, the shipped tasks of each env kind, and importing / exporting task files.
 */
import { API_ROOT, apiFetch } from "./client";
import type { Schemas, Split, TaskSpec } from "./types";

export type TaskFormat = Schemas["FormatEnum"];
export type CatalogueTask = Schemas["CatalogueTaskOutput"];
export type CatalogueKind = Schemas["CatalogueKindOutput"];
/** A task's fields to create it (all of them) or change them (those that change). */
export type TaskWrite = Partial<Schemas["TaskCreateInputRequest"]>;

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
