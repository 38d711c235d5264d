import { ComingSoon } from "../components/ComingSoon";
import { useIdParam } from "../components/useIdParam";

export function DatasetsPage() {
  return (
    <ComingSoon projectId={useIdParam("projectId")} title="Datasets">
      Frozen dataset snapshots (SFT, DPO, RL, CT) built from accepted episodes: their filters, row
      counts and content hashes, with export downloads.
    </ComingSoon>
  );
}
