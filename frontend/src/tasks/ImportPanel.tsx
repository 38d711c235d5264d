import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { ApiError } from "../api/client";
import { type Split, taskExportUrl, type TaskFormat, taskImport, taskKeys, type TaskSpec } from "../api/tasks";
import { ErrorBanner } from "../components/ErrorBanner";

/** Import OSWorld / WebArena task files (all or none: every problem is listed) and download the project's tasks. */
export function ImportPanel({ projectId, onDone }: { projectId: number; onDone: () => void }) {
  const client = useQueryClient();
  const [format, setFormat] = useState<TaskFormat>("osworld");
  const [split, setSplit] = useState<Split>("train");
  const [files, setFiles] = useState<File[]>([]);
  const upload = useMutation({
    mutationFn: () => taskImport(projectId, format, split, files),
    onSuccess: () => client.invalidateQueries({ queryKey: taskKeys.list(projectId) }),
  });
  const problems = upload.error instanceof ApiError ? (upload.error.fieldErrors.tasks ?? []) : [];
  const imported: TaskSpec[] = upload.data?.results ?? [];

  function submit(event: FormEvent) {
    event.preventDefault();
    upload.mutate();
  }

  return (
    <form className="card" onSubmit={submit} aria-label="Import tasks" data-testid="import-panel">
      <div className="section-header">
        <h2>Import task files</h2>
      </div>
      <p className="muted small">
        OSWorld files become desktop tasks; WebArena files (and any-URL tasks) become webapp tasks. A file may hold
        one task or a list. If any task is refused, nothing is imported.
      </p>
      <div className="inline-form">
        <label className="field">
          <span>Format</span>
          <select value={format} data-testid="import-format" onChange={(e) => setFormat(e.target.value as TaskFormat)}>
            <option value="osworld">OSWorld (desktop)</option>
            <option value="webarena">WebArena / any URL (webapp)</option>
          </select>
        </label>
        <label className="field">
          <span>Split</span>
          <select value={split} onChange={(e) => setSplit(e.target.value as Split)}>
            <option value="train">train</option>
            <option value="eval">eval</option>
          </select>
        </label>
        <label className="field">
          <span>Files</span>
          <input
            type="file"
            accept=".json,application/json"
            multiple
            data-testid="import-files"
            onChange={(e) => {
              setFiles(Array.from(e.target.files ?? []));
              upload.reset();
            }}
          />
        </label>
        <button type="submit" className="button primary" disabled={!files.length || upload.isPending} data-testid="import-submit">
          {upload.isPending ? "Importing…" : "Import"}
        </button>
        <button type="button" className="button subtle" onClick={onDone}>
          Close
        </button>
      </div>
      {upload.error && (
        <div data-testid="import-errors">
          {/* several problems: the banner counts them and the list says each once (the server's detail repeats the first) */}
          <ErrorBanner
            error={upload.error}
            fieldErrors={{}}
            message={problems.length > 1 ? `Nothing was imported: ${problems.length} problems, each below.` : undefined}
            title="Import refused"
          />
          {problems.length > 1 && (
            <ul className="banner-fields">
              {problems.map((problem, index) => (
                <li key={index} className="field-error typed-text">
                  {problem}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {upload.isSuccess && (
        <p className="banner banner-info" role="status" data-testid="import-done">
          Imported {imported.length} task{imported.length === 1 ? "" : "s"}: {imported.map((t) => t.task_name).join(", ")}
        </p>
      )}
      <div className="section-header">
        <h2>Export</h2>
      </div>
      <p className="muted small">The project's tasks as a file of that format: yours as written, shipped ones as shipped.</p>
      <div className="form-actions">
        <a className="button" href={taskExportUrl(projectId, "osworld")} download data-testid="export-osworld">
          Download OSWorld tasks
        </a>
        <a className="button" href={taskExportUrl(projectId, "webarena")} download data-testid="export-webarena">
          Download WebArena tasks
        </a>
      </div>
    </form>
  );
}
