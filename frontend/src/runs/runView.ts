/**
 * How a training run reads to a person: its title, its loss curves and what to do when it failed.
 * Pure functions, kept apart from the page so they are tested without rendering.
 */
import type { TrainingRun } from "../api/runs";
import type { Series } from "../components/LineChart";

/** A run is a list of stages; the cold start is the one whose stage is `coldstart` (demos, then SFT). */
export function isColdStart(run: TrainingRun): boolean {
  const stages = run.config?.stages;
  return Array.isArray(stages) && stages.some((stage) => (stage as { algorithm?: unknown } | null)?.algorithm === "coldstart");
}

export function runTitle(run: TrainingRun): string {
  if (isColdStart(run)) return "Training the first policy (v0) from scripted demonstrations";
  return `${run.algorithm.toUpperCase()} run #${run.id}`;
}

/** The run's warnings (a time budget that cut it, epochs that capped it), in the server's words. */
export function runWarnings(run: TrainingRun): string[] {
  return (run.warnings ?? []).filter((w) => typeof w === "string" && w.trim() !== "");
}

/** The status a person reads: a run that succeeded with warnings must not look like a plain success. */
export function runStatusText(run: TrainingRun): string {
  const count = runWarnings(run).length;
  if (run.status === "succeeded" && count > 0) return count === 1 ? "finished with a warning" : `finished with ${count} warnings`;
  return run.status;
}

/** One loss series per phase (demos, sft, dpo, rl, ...), in the order the phases ran. */
export function lossSeries(run: TrainingRun): Series[] {
  const byPhase = new Map<string, { x: number; y: number }[]>();
  for (const metric of run.metrics ?? []) {
    if (typeof metric.loss !== "number" || !Number.isFinite(metric.loss) || typeof metric.step !== "number") continue;
    const phase = typeof metric.phase === "string" && metric.phase ? metric.phase : run.algorithm;
    if (!byPhase.has(phase)) byPhase.set(phase, []);
    byPhase.get(phase)!.push({ x: metric.step, y: metric.loss });
  }
  const series: Series[] = [...byPhase.entries()].map(([name, points]) => ({ name, points }));
  const validation = validationSeries(run);
  return validation ? [...series, validation] : series;
}

/** The loss on the held-out rows (a cycle's SFT with a validation split: `val_loss` on its progress lines), the
 * curve that shows memorising: it stops falling, or rises, while the training loss still falls. */
export function validationSeries(run: TrainingRun): Series | null {
  const points: { x: number; y: number }[] = [];
  for (const metric of run.metrics ?? []) {
    const value = metric.val_loss;
    if (typeof value !== "number" || !Number.isFinite(value) || typeof metric.step !== "number") continue;
    points.push({ x: metric.step, y: value });
  }
  return points.length ? { name: "validation (held-out rows)", points, color: "#db2777" } : null;
}

/** Where the held-out loss was lowest and what the run kept, e.g. "Validation loss 0.410 at step 10 → lowest 0.220
 * at step 60, 0.300 at step 90; the checkpoint keeps the weights of step 60". Null for a run without a validation
 * split. (A run stopped early says so in its warnings.) */
export function validationSummary(run: TrainingRun): string | null {
  const series = validationSeries(run);
  if (!series) return null;
  const best = series.points.reduce((a, b) => (b.y < a.y ? b : a));
  const first = series.points[0];
  const last = series.points[series.points.length - 1];
  return (
    `Validation loss ${first.y.toFixed(3)} at step ${first.x} → lowest ${best.y.toFixed(3)} at step ${best.x}` +
    (best.x !== last.x ? `, ${last.y.toFixed(3)} at step ${last.x}; the checkpoint keeps the weights of step ${best.x}` : "")
  );
}

/** A span of seconds as a person reads it: "45 s", "12 min 5 s", "1 h 20 min". */
export function formatSpan(seconds: number): string {
  const whole = Math.max(0, Math.round(seconds));
  if (whole < 60) return `${whole} s`;
  const h = Math.floor(whole / 3600);
  const m = Math.floor((whole % 3600) / 60);
  if (h > 0) return `${h} h ${m} min`;
  const s = whole % 60;
  return s ? `${m} min ${s} s` : `${m} min`;
}

/** Where the run's time went: in the queue (waiting for a training worker) apart from training, e.g. "12 s in the
 * queue · training for 3 min 5 s" while it runs, "trained in 5 min 2 s" once it ended. A cold start says it is one
 * ("the cold start took ..."): how long a new project waits for its first trained policy. Null when neither is known
 * (a run registered by hand). */
export function runTimes(run: TrainingRun): string | null {
  const parts: string[] = [];
  if (typeof run.queued_seconds === "number") {
    parts.push(run.status === "queued" ? `waiting in the queue for ${formatSpan(run.queued_seconds)}` : `${formatSpan(run.queued_seconds)} in the queue`);
  }
  if (typeof run.training_seconds === "number") {
    const span = formatSpan(run.training_seconds);
    const ended = run.status === "succeeded" || run.status === "failed";
    if (!ended) parts.push(`training for ${span}`);
    else if (isColdStart(run) && run.status === "succeeded") parts.push(`the cold start took ${span}`);
    else parts.push(`${run.status === "failed" ? "failed after" : "trained in"} ${span}`);
  }
  return parts.length ? parts.join(" · ") : null;
}

/** What the loss chart leaves out: a long run's progress lines are thinned, e.g. "The chart keeps every 4th of the
 * run's 1,200 progress lines." Null when it draws every line. */
export function thinnedNote(run: TrainingRun): string | null {
  const every = run.metrics_every ?? 1;
  if (every <= 1) return null;
  const lines = (run.metrics_lines ?? 0).toLocaleString("en");
  return `The chart keeps every ${ordinal(every)} of the run's ${lines} progress lines (at most ${every - 1} left out between two points).`;
}

function ordinal(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${{ 1: "st", 2: "nd", 3: "rd" }[n % 10] ?? "th"}`;
}

const PHASE_WORDS: Record<string, [string, string]> = {
  base: ["Preparing the base model", ""],
  demos: ["Recording demonstrations", "episode"],
  sft: ["Supervised fine-tuning", "step"],
  dpo: ["Preference training (DPO)", "step"],
  rl: ["Reinforcement learning", "step"],
};

/** Where a running run is, in words: "Recording demonstrations: episode 440 of 450", "Supervised fine-tuning: step
 * 0 of 60". Null before its first progress line. */
export function progressText(run: TrainingRun): string | null {
  const latest = latestMetric(run);
  if (!latest || typeof latest.step !== "number") return null;
  const phase = typeof latest.phase === "string" && latest.phase ? latest.phase : run.algorithm;
  const [name, unit] = PHASE_WORDS[phase] ?? [phase.toUpperCase(), "step"];
  if (!unit) return name;
  const total = typeof latest.total === "number" && latest.total ? ` of ${latest.total}` : "";
  return `${name}: ${unit} ${latest.step}${total}`;
}

/** The latest metric, for "step 120 of 400 · loss 0.42". */
export function latestMetric(run: TrainingRun) {
  const metrics = run.metrics ?? [];
  return metrics.length ? metrics[metrics.length - 1] : null;
}

/** What to try after a failure, read from the error the trainer left. */
export function nextSteps(run: TrainingRun): string {
  const text = `${run.error}\n${run.log_tail}`.toLowerCase();
  if (/out of memory|cuda oom|cannot allocate memory|killed/.test(text)) {
    return "The trainer ran out of memory. Start the run again with a smaller batch size or a smaller model.";
  }
  if (/no (training )?(rows|examples|data)|empty dataset|dataset is empty|no demonstrations/.test(text)) {
    return "There was nothing to train on. Annotate or review more episodes, snapshot a dataset, then start the run again.";
  }
  if (/no such file|not found|does not exist/.test(text)) {
    return "A file the run needs is missing (a checkpoint or dataset snapshot may have been deleted). Pick existing inputs and start again.";
  }
  if (/nan|inf(inite)? loss|diverg/.test(text)) {
    return "The loss diverged. Lower the learning rate and start the run again.";
  }
  return "Read the log below for the first error, fix its cause, then start the run again. The deployed policy is unchanged.";
}
