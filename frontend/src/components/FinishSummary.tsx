import type { Episode } from "../api/episodes";
import { formatReward } from "./format";
import { OutcomeBadge } from "./Badge";

/**
 * How an ended episode was judged: the person's outcome beside what the task's own check paid, the person's
 * comment, and, where the two disagree, why the episode waits for a review.
 */
export function FinishSummary({ episode }: { episode: Pick<Episode, "outcome" | "reward" | "comment" | "review_reason"> }) {
  return (
    <div className="finish-summary" data-testid="finish-summary">
      <dl className="facts">
        <div>
          <dt>Person's outcome</dt>
          <dd data-testid="finished-outcome">
            <OutcomeBadge outcome={episode.outcome} />
          </dd>
        </div>
        <div>
          <dt>Task's check</dt>
          <dd className="mono" data-testid="finished-reward" title="What the task's own check paid (0 to 1)">
            {episode.reward === null ? "not scored" : formatReward(episode.reward)}
          </dd>
        </div>
      </dl>
      {episode.review_reason ? (
        <p className="banner banner-warning" role="status" data-testid="review-reason">
          <strong>Waits for a review.</strong> {episode.review_reason}
        </p>
      ) : null}
      {episode.comment ? (
        <div className="finish-comment">
          <h3>Comment when finishing</h3>
          <p className="user-text" data-testid="finish-comment-text">
            {episode.comment}
          </p>
        </div>
      ) : null}
    </div>
  );
}
