import { useNavigate } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { useQueue, useReleaseItem, type useReviewNext } from "./queueQueries";

/**
 * Above a replay opened by "Review next": which queue the episode came from, and skip / let go. After the
 * review is saved the replay calls the same "next" (see ReplayPage's `onReviewed`).
 */
export function QueueBar({
  projectId,
  queueId,
  itemId,
  next,
}: {
  projectId: number;
  queueId: number;
  itemId: number | null;
  next: ReturnType<typeof useReviewNext>;
}) {
  const navigate = useNavigate();
  const queue = useQueue(queueId);
  const release = useReleaseItem();
  const skip = () => {
    if (itemId === null) return next.go(queueId);
    release.mutate({ itemId, skip: true }, { onSuccess: () => next.go(queueId) });
  };
  const stop = () => {
    const back = () => navigate(`/projects/${projectId}/review`);
    if (itemId === null) return back();
    release.mutate({ itemId, skip: false }, { onSuccess: back });
  };
  return (
    <div className="card queue-bar" data-testid="queue-bar">
      <span>
        Reviewing from queue <strong>{queue.data?.name ?? `#${queueId}`}</strong>: this episode is yours for{" "}
        {Math.round((queue.data?.hold_seconds ?? 900) / 60)} minutes. Save your review to go on to the next one.
      </span>{" "}
      <button type="button" className="button small" onClick={skip} data-testid="queue-skip">
        Skip this one
      </button>{" "}
      <button type="button" className="button subtle small" onClick={stop} data-testid="queue-stop">
        Stop reviewing
      </button>
      {next.empty === queueId && (
        <p data-testid="queue-empty">Nothing left for you in this queue. Thank you!</p>
      )}
      {(next.mutation.isError || release.isError) && (
        <ErrorBanner error={next.mutation.error ?? release.error} title="Could not move on in the queue" />
      )}
    </div>
  );
}
