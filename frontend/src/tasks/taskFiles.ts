/**
 * The project's file store (flywheel/api_tasks.py TaskFilesApi): the files its OSWorld tasks download, which a
 * manager uploads here since the workers reach no internet; a task missing one is refused at start naming it.
 */
import { apiFetch } from "../api/client";
import type { Schemas } from "../api/types";

export type TaskFiles = Schemas["TaskFilesOutput"];
export type NeededFile = Schemas["NeededFileOutput"];
export type StoredFile = Schemas["StoredFileOutput"];

export const taskFileKeys = {
  list: (projectId: number) => ["project", projectId, "tasks", "files"] as const,
};

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

/** A byte count as a person reads it. */
export function fileSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}
