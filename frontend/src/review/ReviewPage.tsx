import { ComingSoon } from "../components/ComingSoon";
import { useIdParam } from "../components/useIdParam";

export function ReviewPage() {
  return (
    <ComingSoon projectId={useIdParam("projectId")} title="Review">
      Finished episodes waiting for review: replay each with its audio and transcript, then accept,
      reject or grade it and label individual steps.
    </ComingSoon>
  );
}
