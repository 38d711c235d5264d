import type { EpisodeOutcome, EpisodeStatus, Role } from "../api/types";

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
