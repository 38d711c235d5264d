/**
 * A project's tasks (flywheel/api_tasks.py): the list, create, edit and remove them with
 * their JSON definitions, the shipped tasks of each env kind, and importing / exporting task files.
 */
import { API_ROOT, apiFetch, fetchAll } from "./client";
import type { Schemas } from "./types";

export type Split = Schemas["SplitEnum"];
export type TaskSpec = Schemas["TaskOutput"];
export type TaskFormat = Schemas["FormatEnum"];
export type CatalogueTask = Schemas["CatalogueTaskOutput"];
export type CatalogueKind = Schemas["CatalogueKindOutput"];
/** A task's fields to create it (all of them) or change them (those that change). */
export type TaskWrite = Partial<Schemas["TaskCreateInputRequest"]>;

/** The project's file store: the files its OSWorld tasks download (the workers reach no internet). */
export type TaskFiles = Schemas["TaskFilesOutput"];
export type NeededFile = Schemas["NeededFileOutput"];
export type StoredFile = Schemas["StoredFileOutput"];

export const taskKeys = {
  list: (projectId: number) => ["project", projectId, "tasks"] as const,
  /** Each env kind's shipped tasks (the same for every project). */
  catalogue: () => ["tasks", "catalogue"] as const,
  /** The files the project's tasks download, stored or missing (refreshed with the task list). */
  files: (projectId: number) => ["project", projectId, "tasks", "files"] as const,
};

export const taskList = (projectId: number, signal?: AbortSignal) =>
  fetchAll<TaskSpec>(`projects/${projectId}/tasks/`, signal);

export const taskRemove = (projectId: number, taskId: number) =>
  apiFetch<void>(`projects/${projectId}/tasks/${taskId}/`, { method: "DELETE" });

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

// --- the file store (flywheel/api_tasks.py TaskFilesApi): a task missing one of its files is refused at start ----

export const taskFilesList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<{ results: TaskFiles[] }>(`projects/${projectId}/tasks/files`, { signal }).then((data) => data.results);

/** Store `file` as the one a task downloads from `url` (for the target `path`: only that task's copy). */
export function taskFileUpload(projectId: number, url: string, path: string, file: File) {
  const form = new FormData();
  form.set("url", url);
  form.set("path", path);
  form.set("file", file, file.name);
  return apiFetch<StoredFile>(`projects/${projectId}/tasks/files`, { method: "POST", rawBody: form });
}

export const taskFileRemove = (projectId: number, fileId: number) =>
  apiFetch<void>(`projects/${projectId}/tasks/files/${fileId}`, { method: "DELETE" });
