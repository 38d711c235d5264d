import { useCallback, useEffect, useState, useSyncExternalStore } from "react";
import { type QueueStatus, type UploadQueue, uploadQueueFor, uploadStatusText } from "./uploadQueue";

export function useQueueStatus(queue: UploadQueue): QueueStatus {
  return useSyncExternalStore(
    useCallback((listener) => queue.subscribe(listener), [queue]),
    () => queue.status,
  );
}

/** How the uploads stand: "3 chunks waiting, retrying in 4 s", with a retry button and any refusals. */
export function UploadStatus({ queue }: { queue: UploadQueue }) {
  const status = useQueueStatus(queue);
  // The countdown re-renders every half second; each render reads the clock afresh, so the first
  // render of a retry never counts from a time before the retry was scheduled.
  const [, setTick] = useState(0);
  const retrying = status.state === "retrying";
  useEffect(() => {
    if (!retrying) return;
    const timer = setInterval(() => setTick((tick) => tick + 1), 500);
    return () => clearInterval(timer);
  }, [retrying]);

  return (
    <>
      <p
        className={`small upload-status upload-${status.state}`}
        data-testid="upload-status"
        data-state={status.state}
        data-waiting={status.waiting}
        data-finishing={status.finishing}
        data-uploaded={status.uploaded}
        role="status"
      >
        {uploadStatusText(status, Date.now())}
        {retrying && (
          <button type="button" className="button subtle small" onClick={() => queue.retryNow()}>
            Retry now
          </button>
        )}
      </p>
      {status.waiting > 0 && !status.persistent && (
        <p className="muted small">Keep this tab open until the audio is uploaded.</p>
      )}
      {status.failed.length > 0 && (
        <ul className="upload-failures" data-testid="upload-failures">
          {status.failed.map((failure) => (
            <li
              key={`${failure.clientId}:${failure.index}`}
              className="field-error"
              title={failure.detail || undefined}
              data-testid="upload-failure"
            >
              {failure.index >= 0
                ? `A piece of your recording could not be saved${failure.lost > 0 ? `, nor the ${failure.lost} after it` : ""}`
                : "Closing a recording failed"}
              : {failure.message}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

/**
 * For a person who may not record here (a watcher, an ended episode): audio they recorded earlier,
 * perhaps in a tab closed while offline, still uploads from this page, and they see it go.
 */
export function PendingUploads({ username }: { username: string }) {
  const queue = uploadQueueFor(username);
  const status = useQueueStatus(queue);
  if (status.waiting === 0 && status.finishing === 0 && status.failed.length === 0) return null;
  return (
    <section className="card mic-control" data-testid="pending-uploads" aria-label="Think-aloud uploads">
      <h2>Your earlier think-aloud audio</h2>
      <UploadStatus queue={queue} />
    </section>
  );
}
