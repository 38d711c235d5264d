import type { ReviewStatus } from "../api/review";

/** unreviewed / accepted / rejected / disputed, coloured like outcomes. */
export function ReviewStatusBadge({ status, testId }: { status: ReviewStatus; testId?: string }) {
  return (
    <span className={`badge review-${status}`} data-testid={testId}>
      {status}
    </span>
  );
}
