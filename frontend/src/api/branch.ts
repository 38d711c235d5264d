/**
 * Branching an episode from one of its steps (flywheel/api.py EpisodeBranchApi): the new episode replays the
 * parent's steps before that one on the same seed, checking the screen matches, then acts anew.
 */
import { apiFetch } from "./client";
import type { Episode } from "./episodes";
import type { Schemas } from "./types";

export type BranchMode = Schemas["ModeEnum"];
/** Where a branch branched from: its parent episode and the step it acts on anew. */
export type BranchOf = Schemas["BranchOfOutput"];

export const branchKeys = {
  list: (episodeId: number) => ["episode", episodeId, "branches"] as const,
  comparison: (branchId: number) => ["episode", branchId, "comparison"] as const,
};

export function fetchBranches(episodeId: number): Promise<Schemas["EpisodeBranches"]> {
  return apiFetch(`episodes/${episodeId}/branch`);
}

export function createBranch(episodeId: number, step: number, mode: BranchMode): Promise<Episode> {
  return apiFetch(`episodes/${episodeId}/branch`, { method: "POST", body: { step, mode } });
}

/** One side of a comparison: the episode, its judge's newest verdict, its steps from the branch point on. */
export type ComparisonSide = Schemas["ComparisonSideOutput"];

/** A branch beside its parent from the branch point (GET episodes/<branch>/compare, managers). */
export type BranchComparison = Schemas["BranchCompareOutput"];

export function fetchComparison(branchId: number, signal?: AbortSignal): Promise<BranchComparison> {
  return apiFetch(`episodes/${branchId}/compare`, { signal });
}
