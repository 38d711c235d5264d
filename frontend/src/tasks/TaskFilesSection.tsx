import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { type NeededFile, taskFileRemove, taskFilesList, taskFileUpload, taskKeys } from "../api/tasks";
import { fileSize } from "./taskFiles";

/**
 * Task files: each OSWorld task that downloads files, with each file stored or missing, and an upload beside it.
 * Shown only when some task downloads a file.
 */
export function TaskFilesSection({ projectId }: { projectId: number }) {
  const client = useQueryClient();
  const listing = useQuery({ queryKey: taskKeys.files(projectId), queryFn: ({ signal }) => taskFilesList(projectId, signal) });
  const refresh = () => client.invalidateQueries({ queryKey: taskKeys.files(projectId) });
  const upload = useMutation({
    mutationFn: ({ file, needed }: { file: File; needed: NeededFile; key: string }) =>
      taskFileUpload(projectId, needed.url, "", file),
    onSuccess: refresh,
  });
  const remove = useMutation({ mutationFn: (fileId: number) => taskFileRemove(projectId, fileId), onSuccess: refresh });

  if (listing.isPending) return <Spinner label="Loading task files…" />;
  if (listing.isError) return <ErrorBanner error={listing.error} onRetry={() => listing.refetch()} />;
  if (!listing.data.length) return null;
  const missing = listing.data.reduce((sum, task) => sum + task.missing, 0);
  return (
    <section className="card" aria-label="Task files" data-testid="task-files">
      <div className="section-header">
        <h2>Task files</h2>
      </div>
      <p className="muted small">
        Files your OSWorld tasks download. The workers reach no internet, so upload each file here; a task that is
        missing one cannot start until it is uploaded.{" "}
        {missing ? <strong>{missing} missing.</strong> : "All are here."}
      </p>
      {listing.data.map((task) => (
        <div key={task.task} className="task-files" data-testid="task-files-task" data-task={task.task_name}>
          <h3 className="small">
            {task.task_name} <span className={`badge split-${task.split}`}>{task.split}</span>
            {task.missing > 0 && <span className="badge danger"> {task.missing} missing</span>}
          </h3>
          <ul className="plain-list">
            {task.files.map((needed) => {
              const key = `${task.task}:${needed.url}:${needed.path}`;
              const failed = upload.error && upload.variables?.key === key;
              return (
                <li key={key} data-testid="task-file" data-file={needed.name} data-missing={needed.stored ? "no" : "yes"}>
                  <strong className="typed-text">{needed.name}</strong>{" "}
                  <span className="muted small" title={needed.url}>
                    {needed.where} · {needed.url.length > 80 ? `${needed.url.slice(0, 77)}…` : needed.url}
                  </span>{" "}
                  {needed.stored ? (
                    <>
                      <span className="badge">
                        stored: {needed.stored.name} ({fileSize(needed.stored.size)})
                      </span>{" "}
                      <button
                        type="button"
                        className="button subtle small"
                        disabled={remove.isPending}
                        onClick={() => needed.stored && remove.mutate(needed.stored.id)}
                      >
                        Remove
                      </button>
                    </>
                  ) : (
                    <label className="field inline">
                      <span className="badge danger">missing</span>{" "}
                      <input
                        type="file"
                        aria-label={`Upload ${needed.name}`}
                        data-testid="task-file-upload"
                        disabled={upload.isPending}
                        onChange={(event) => {
                          const file = event.target.files?.[0];
                          if (file) upload.mutate({ file, needed, key });
                          event.target.value = "";
                        }}
                      />
                    </label>
                  )}
                  {upload.isPending && upload.variables?.key === key && <Spinner label="Uploading…" />}
                  {failed && <ErrorBanner error={upload.error} title={`Could not upload ${needed.name}`} />}
                </li>
              );
            })}
          </ul>
        </div>
      ))}
      {remove.error && <ErrorBanner error={remove.error} title="Could not remove the file" />}
    </section>
  );
}
