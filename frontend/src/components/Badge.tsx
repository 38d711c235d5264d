import type { EpisodeOutcome, EpisodeStatus } from "../api/episodes";
import type { Role } from "../api/projects";
import { describeEndReason } from "./endReason";

/** A role badge; `null` (no membership, e.g. staff browsing) reads "viewer". */
export function RoleBadge({ role }: { role: Role | null }) {
  return <span className={`badge role-${role ?? "none"}`}>{role ?? "viewer"}</span>;
}

export function StatusBadge({ status }: { status: EpisodeStatus }) {
  return <span className={`badge status-${status}`}>{status}</span>;
}

export function OutcomeBadge({ outcome }: { outcome: EpisodeOutcome }) {
  if (!outcome) return <span className="muted">—</span>;
  return <span className={`badge outcome-${outcome}`}>{outcome}</span>;
}

/** Why an episode ended, in plain words (see endReason.ts); nothing while it has not ended. */
export function EndReason({ reason, className = "muted small" }: { reason: string | null | undefined; className?: string }) {
  const text = describeEndReason(reason);
  if (!text) return null;
  return (
    <span className={`end-reason ${className}`} data-testid="end-reason" title={text}>
      {text}
    </span>
  );
}
