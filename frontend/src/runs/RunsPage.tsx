import { ComingSoon } from "../components/ComingSoon";
import { useIdParam } from "../components/useIdParam";

export function RunsPage() {
  return (
    <ComingSoon projectId={useIdParam("projectId")} title="Runs">
      Training runs and flywheel cycles: live progress and loss curves, evaluations against the
      deployed checkpoint, and one-click promotion or rollback of deployments.
    </ComingSoon>
  );
}
