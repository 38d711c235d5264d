/**
 * Branching an episode from one of its steps (flywheel/api.py EpisodeBranchApi): the new episode replays the
 * parent's steps before that one on the same seed, checking the screen matches, then acts anew.
 */
import { apiFetch } from "./client";
import type { ReplayStep, ReviewStatus } from "./review";
import type { Episode } from "./types";

export type BranchMode = "supervised" | "autonomous";

/** Where an episode branched from: its parent episode and the step it acts on anew. */
export interface BranchOf {
  episode: number;
  step: number;
}

export function fetchBranches(episodeId: number): Promise<{ results: (Episode & { branch_of: BranchOf | null })[] }> {
  return apiFetch(`episodes/${episodeId}/branch`);
}

export function createBranch(episodeId: number, step: number, mode: BranchMode): Promise<Episode> {
  return apiFetch(`episodes/${episodeId}/branch`, { method: "POST", body: { step, mode } });
}

/** One side of a comparison: the episode, its judge's newest verdict, its steps from the branch point on. */
export interface ComparisonSide {
  episode: Episode & { review_status: ReviewStatus; branch_of: BranchOf | null };
  judge: { verdict: "success" | "failure" | null; reason: string; confidence: number | null } | null;
  steps: ReplayStep[];
}

/** A branch beside its parent from the branch point (GET episodes/<branch>/compare, managers). */
export interface BranchComparison {
  /** The 0-based index of the step the branch acts on anew. */
  branched_at: number;
  branch: ComparisonSide;
  /** null when the parent episode was deleted. */
  parent: ComparisonSide | null;
  /** The DPO pair the two make: at which step, whose step is chosen and what decided it (review, reward, judge). */
  pair: { index: number; chosen: "branch" | "parent"; by: "review" | "reward" | "judge"; in_dataset: boolean } | null;
  /** For each step both have: what makes the two screens count as different (address, elements), or null. */
  screens?: { index: number; differs: string | null }[];
  /** Why they make no pair, in words; empty when they make one. */
  no_pair: string;
}

export function fetchComparison(branchId: number, signal?: AbortSignal): Promise<BranchComparison> {
  return apiFetch(`episodes/${branchId}/compare`, { signal });
}
