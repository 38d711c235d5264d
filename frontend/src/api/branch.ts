/**
 * Branching an episode from one of its steps (flywheel/api.py EpisodeBranchApi): the new episode replays the
 * parent's steps before that one on the same seed, checking the screen matches, then acts anew.
 */
import { apiFetch } from "./client";
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
