/**
 * How a flywheel cycle reads to a person: its steps and their timings, the success-rate series across
 * iterations, percentages, and what to do after a failure. Pure functions, tested without rendering.
 */
import type { Cycle, CycleState } from "../api/cycles";
import type { Series } from "../components/LineChart";
import { nextSteps } from "../runs/runView";

export const CYCLE_STEPS: { state: CycleState; label: string }[] = [
  { state: "gate", label: "Gate" },
  { state: "snapshot", label: "Snapshot" },
  { state: "train", label: "Train" },
  { state: "evaluate", label: "Evaluate" },
  { state: "decide", label: "Decide" },
];

const TERMINAL: CycleState[] = ["deployed", "rejected", "skipped", "failed"];

/** Whether the cycle may still change on its own (so the page keeps asking). */
export function isCycleActive(cycle: Cycle): boolean {
  return !TERMINAL.includes(cycle.state);
}

export type StepStatus = "done" | "current" | "failed" | "skipped" | "pending";

/** Where each step stands: finished, running now, where the cycle failed, or not reached. */
export function stepStatus(cycle: Cycle, state: CycleState): StepStatus {
  const timing = cycle.timings[state];
  if (!timing) return cycle.state === "skipped" && state !== "gate" ? "skipped" : "pending";
  if (cycle.state === state) return "current";
  if (cycle.state === "failed" && !timing.finished) return "failed";
  return "done";
}

/** The step a failed cycle stopped in. */
export function failedStep(cycle: Cycle): CycleState | null {
  if (cycle.state !== "failed") return null;
  return CYCLE_STEPS.find((s) => stepStatus(cycle, s.state) === "failed")?.state ?? null;
}

export function formatSeconds(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  const rest = Math.round(seconds - minutes * 60);
  return rest ? `${minutes} min ${rest} s` : `${minutes} min`;
}

/** Seconds a step took, or has taken so far when it is running (`now` in ms). */
export function stepSeconds(cycle: Cycle, state: CycleState, now = Date.now()): number | null {
  const timing = cycle.timings[state];
  if (!timing) return null;
  if (typeof timing.seconds === "number") return timing.seconds;
  if (cycle.state !== state) return null;
  return Math.max(0, (now - new Date(timing.started).getTime()) / 1000);
}

/** Wall time of the whole cycle (so far). */
export function cycleSeconds(cycle: Cycle, now = Date.now()): number {
  const end = cycle.finished_at ? new Date(cycle.finished_at).getTime() : now;
  return Math.max(0, (end - new Date(cycle.started_at).getTime()) / 1000);
}

export function formatRate(rate: number | null | undefined): string {
  if (rate === null || rate === undefined || !Number.isFinite(rate)) return "—";
  return `${(rate * 100).toFixed(1)}%`;
}

/** One eval task's success for the candidate and the deployed checkpoint of a cycle (same seeds) and the change. */
export interface TaskComparison {
  task: string;
  candidate: number | null;
  deployed: number | null;
  /** candidate − deployed, in points of success rate (null when either is missing). */
  points: number | null;
  episodes: number;
}

/** Per eval task, the candidate against the deployed checkpoint on the same seeds (tasks sorted by name). */
export function taskComparison(cycle: Cycle): TaskComparison[] {
  const candidate = cycle.evaluations.find((e) => e.role === "candidate");
  const deployed = cycle.evaluations.find((e) => e.role === "deployed");
  if (!candidate) return [];
  const tasks = [...new Set([...Object.keys(candidate.per_task), ...Object.keys(deployed?.per_task ?? {})])].sort();
  return tasks.map((task) => {
    const c = candidate.per_task[task]?.success_rate ?? null;
    const d = deployed?.per_task[task]?.success_rate ?? null;
    return {
      task,
      candidate: c,
      deployed: d,
      points: c !== null && d !== null ? Math.round((c - d) * 1000) / 10 : null,
      episodes: candidate.per_task[task]?.episodes ?? 0,
    };
  });
}

function pointsText(points: number): string {
  return `${points > 0 ? "+" : points < 0 ? "−" : "±"}${Math.abs(points).toFixed(1)} points`;
}

/**
 * Where a candidate lost and won against the deployed checkpoint, per task, in one sentence a manager can act on
 * ("Worse than c1 on click-link (40.0% vs 70.0%, −30.0 points); better on click-dialog (+20.0 points)."). Null when
 * there is no deployed measurement to compare with, or no task changed.
 */
export function taskChangeText(cycle: Cycle): string | null {
  const rows = taskComparison(cycle).filter((r) => r.points !== null && r.points !== 0);
  const deployed = cycle.evaluations.find((e) => e.role === "deployed");
  if (!deployed || rows.length === 0) return null;
  const worse = rows.filter((r) => (r.points ?? 0) < 0).sort((a, b) => (a.points ?? 0) - (b.points ?? 0));
  const better = rows.filter((r) => (r.points ?? 0) > 0).sort((a, b) => (b.points ?? 0) - (a.points ?? 0));
  const parts: string[] = [];
  if (worse.length)
    parts.push(`Worse than ${deployed.checkpoint.name} on ` + worse.map((r) =>
      `${r.task} (${formatRate(r.candidate)} vs ${formatRate(r.deployed)}, ${pointsText(r.points ?? 0)})`).join(", "));
  if (better.length)
    parts.push(`${worse.length ? "better" : `Better than ${deployed.checkpoint.name}`} on ` +
      better.map((r) => `${r.task} (${pointsText(r.points ?? 0)})`).join(", "));
  return `${parts.join("; ")}.`;
}

/** Success rate (%) of the candidate and of the deployed checkpoint, one point per cycle that measured them. */
export function successSeries(cycles: Cycle[]): Series[] {
  const candidate: Series = { name: "candidate", points: [], color: "#4f46e5" };
  const deployed: Series = { name: "deployed (same cycle, same seeds)", points: [], color: "#0d9488" };
  for (const cycle of [...cycles].sort((a, b) => a.iteration - b.iteration)) {
    for (const evaluation of cycle.evaluations) {
      if (evaluation.success_rate === null) continue;
      const series = evaluation.role === "deployed" ? deployed : candidate;
      series.points.push({ x: cycle.iteration, y: Math.round(evaluation.success_rate * 1000) / 10 });
    }
  }
  return [candidate, deployed].filter((s) => s.points.length > 0);
}

/** What to do after a failed cycle, from the step it failed in and what it said. */
export function failureAdvice(cycle: Cycle): string {
  const step = failedStep(cycle);
  const unchanged = " The deployed policy is unchanged.";
  if (step === "train" && cycle.run) return nextSteps(cycle.run);
  if (/deployment was refused/i.test(cycle.error)) {
    return "The candidate's checkpoint files are missing or corrupt, so it was not deployed. Run a cycle again to train a fresh candidate." + unchanged;
  }
  if (step === "evaluate") {
    return "The evaluation could not run. Check that the eval tasks exist and that the checkpoints' files are readable (the log below names the file), then run a cycle again." + unchanged;
  }
  if (step === "snapshot") {
    return "The training data could not be frozen. Check the routing on the Datasets page, then run a cycle again." + unchanged;
  }
  return "Read the log below for the first error, fix its cause, then run a cycle again." + unchanged;
}

/** The one line a cycle list shows under the state. */
export function cycleSummary(cycle: Cycle): string {
  if (cycle.awaiting_approval) return "Waiting for a manager to approve or reject the candidate.";
  if (cycle.state === "failed") return cycle.error || "Failed without a message.";
  if (cycle.decision) return cycle.decision;
  if (cycle.progress.label) return cycle.progress.label;
  return `In ${cycle.state}.`;
}

/**
 * What approving a candidate the gate rejected means, with its numbers: the candidate's and the deployed
 * checkpoint's success on the same eval seeds, and the gate's reason. Shown before anything is deployed.
 */
export function approveAnywayText(cycle: Cycle): { question: string; numbers: string; reason: string } {
  const decision = cycle.decision_data.decision;
  const candidateEval = cycle.evaluations.find((e) => e.role === "candidate");
  const deployedEval = cycle.evaluations.find((e) => e.role === "deployed");
  const candidate = {
    name: decision?.candidate.checkpoint ?? cycle.candidate?.name ?? candidateEval?.checkpoint.name ?? "the candidate",
    rate: decision ? decision.candidate.success_rate : (candidateEval?.success_rate ?? null),
    episodes: decision?.candidate.episodes ?? candidateEval?.episodes ?? 0,
  };
  const deployedName = decision?.deployed?.checkpoint ?? deployedEval?.checkpoint.name ?? cycle.baseline?.name ?? null;
  const deployedRate = decision?.deployed ? decision.deployed.success_rate : (deployedEval?.success_rate ?? null);
  const episodes = candidate.episodes ? ` on the same ${candidate.episodes} eval episode${candidate.episodes === 1 ? "" : "s"} (same seeds)` : "";
  const numbers = deployedName
    ? `Candidate ${candidate.name} succeeded in ${formatRate(candidate.rate)}, the deployed ${deployedName} in ${formatRate(deployedRate)}${episodes}.`
    : `Candidate ${candidate.name} succeeded in ${formatRate(candidate.rate)}${episodes}; no deployed checkpoint was measured to compare.`;
  return {
    question: `Deploy ${candidate.name} although the gate rejected it?`,
    numbers,
    reason: cycle.decision || "The gate gave no reason.",
  };
}
