import { useEffect, useRef, useState } from "react";
import type { Cycle } from "../api/cycles";
import { ErrorBanner } from "../components/ErrorBanner";
import { Table } from "../components/Table";
import { formatDateTime } from "../components/format";
import { LimitCounter } from "../components/LimitCounter";
import { isOverLimit } from "../components/limits";
import { RunCard } from "../runs/RunsPage";
import { runWarnings } from "../runs/runView";
import {
  approveAnywayText,
  CYCLE_STEPS,
  cycleSeconds,
  cycleSummary,
  failedStep,
  failureAdvice,
  formatRate,
  formatSeconds,
  isCycleActive,
  stepSeconds,
  stepStatus,
  taskChangeText,
  taskComparison,
} from "./cycleView";
import { useApproveCycle, useRejectCycle } from "./queries";
import { LearnedTable } from "./LearnedTable";

/** Gate → snapshot → train → evaluate → decide, each with how long it took (or has taken so far). */
function Steps({ cycle }: { cycle: Cycle }) {
  return (
    <ol className="cycle-steps" aria-label="Steps">
      {CYCLE_STEPS.map(({ state, label }) => {
        const status = stepStatus(cycle, state);
        return (
          <li key={state} className={`cycle-step step-${status}`} data-testid={`step-${state}`} data-status={status}>
            <span className="cycle-step-label">{label}</span>
            <span className="cycle-step-time">{status === "pending" || status === "skipped" ? status : formatSeconds(stepSeconds(cycle, state))}</span>
          </li>
        );
      })}
    </ol>
  );
}

/** Progress of the state now running when it is not training (training shows the run's own bar). */
function StateProgress({ cycle }: { cycle: Cycle }) {
  const { done, total, label } = cycle.progress;
  if (!isCycleActive(cycle) || cycle.state === "train" || !total) return label && isCycleActive(cycle) ? <p className="muted small">{label}…</p> : null;
  const percent = Math.round(Math.min(1, (done ?? 0) / total) * 100);
  return (
    <div data-testid="cycle-progress">
      <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={percent} aria-label={label ?? "progress"}>
        <div className="progress-bar" style={{ width: `${percent}%` }} />
      </div>
      <p className="muted small">
        {label}: {done ?? 0} of {total} episodes
      </p>
    </div>
  );
}

/** This cycle's evaluations: the candidate and the deployed checkpoint on the same seeds, and per task the change
 * from the deployed checkpoint to the candidate (where a candidate lost, and where it won). */
export function EvaluationTable({ cycle }: { cycle: Cycle }) {
  if (cycle.evaluations.length === 0) return null;
  const tasks = [...new Set(cycle.evaluations.flatMap((e) => Object.keys(e.per_task)))].sort();
  const change = new Map(taskComparison(cycle).map((r) => [r.task, r.points]));
  const compared = cycle.evaluations.some((e) => e.role === "deployed") && cycle.evaluations.some((e) => e.role === "candidate");
  const changeText = taskChangeText(cycle);
  return (
    <Table
      testId="evaluation-table"
      intro={
        changeText && (
          <p className="small" data-testid="task-change">
            {changeText}
          </p>
        )
      }
      rows={cycle.evaluations}
      rowKey={(e) => e.id}
      rowProps={(e) => ({ "data-testid": "evaluation-row", "data-role": e.role })}
      columns={[
        { header: "Checkpoint", cell: (e) => e.checkpoint.name },
        { header: "Role", cell: (e) => (e.role === "deployed" ? "deployed" : "candidate") },
        {
          header: "Success rate",
          className: "num",
          cell: (e) => <strong>{formatRate(e.success_rate)}</strong>,
        },
        ...tasks.map((t) => ({
          header: t,
          className: "num",
          cell: (e: Cycle["evaluations"][number]) => formatRate(e.per_task[t]?.success_rate),
        })),
        { header: "Episodes", className: "num", cell: (e) => e.episodes },
        {
          header: "Seeds",
          cellProps: () => ({ className: "muted small" }),
          cell: (e) => (
            <>
              {Object.entries(e.seeds)
                .map(([task, seeds]) => `${task} ${seeds}`)
                .join(", ")}
              {e.reused_from ? ` · measured on these seeds in cycle ${e.reused_from.cycle}` : ""}
            </>
          ),
        },
      ]}
      lastRows={
        compared && (
          <tr data-testid="evaluation-change">
            <td colSpan={2} className="muted small">
              candidate − deployed
            </td>
            <td className="num" />
            {tasks.map((t) => {
              const points = change.get(t);
              return (
                <td
                  key={t}
                  className={`num small${points !== undefined && points !== null && points < 0 ? " warn-text" : ""}`}
                  data-testid={`task-change-${t}`}
                >
                  {points === undefined || points === null ? "—" : `${points > 0 ? "+" : points < 0 ? "−" : "±"}${Math.abs(points).toFixed(1)}`}
                </td>
              );
            })}
            <td colSpan={2} className="muted small">
              points, same seeds
            </td>
          </tr>
        )
      }
    />
  );
}

/** What a stage trained on besides its snapshot (flywheel/replay.py): the SFT mix, the DPO pairs kept. */
type StageData = {
  snapshot_rows?: number;
  val_rows?: number;
  val_from?: "corrected" | "new";
  val_corrected_rows?: number;
  val_replay_rows?: number;
  train_snapshot_rows?: number;
  corrected_rows?: number;
  correction_weight?: number;
  replay_rows?: number;
  replay_other_rendering?: number;
  pairs?: number;
  kept?: number;
  dropped_same_action?: number;
  dropped?: string;
  note?: string;
};
type StageVerdict = { ok: boolean; why?: string };

/** The rows each stage trained on (new, held out, replayed from what the deployed checkpoint learnt) and the
 * stages the gate dropped because their new rows could not help, so a manager sees what a candidate learnt from. */
function TrainingData({ cycle }: { cycle: Cycle }) {
  const extra = cycle.decision_data as { data?: Record<string, StageData>; gate?: { stages?: Record<string, StageVerdict> } };
  const lines: string[] = [];
  for (const [kind, d] of Object.entries(extra.data ?? {})) {
    if (d.note) lines.push(`${kind.toUpperCase()}: ${d.note}`);
    else if (d.pairs !== undefined)
      lines.push(`DPO: ${d.kept} of ${d.pairs} pairs whose actions differ` +
        (d.dropped_same_action ? ` (${d.dropped_same_action} left out: same action)` : "") + (d.dropped ? `; ${d.dropped}` : ""));
    else if (d.snapshot_rows !== undefined)
      lines.push(`SFT: ${d.train_snapshot_rows} snapshot rows + ${d.replay_rows} replayed from the deployed checkpoint's training data` +
        (d.corrected_rows && (d.correction_weight ?? 1) > 1 ? ` (${d.corrected_rows} corrected steps counted ${d.correction_weight} times)` : "") +
        (d.val_rows
          ? d.val_from === "corrected"
            ? `; validation loss on ${d.val_corrected_rows} held-out corrected steps and ${d.val_replay_rows} replayed rows`
            : `; ${d.val_rows} snapshot rows held out for the validation loss`
          : "") +
        (d.replay_other_rendering ? `; ${d.replay_other_rendering} replay rows of another prompt style left out` : ""));
  }
  for (const [kind, v] of Object.entries(extra.gate?.stages ?? {}))
    if (!v.ok && cycle.state !== "skipped") lines.push(`${kind.toUpperCase()} stage dropped at the gate: ${v.why}`);
  if (!lines.length) return null;
  return (
    <ul className="muted small" data-testid="cycle-training-data">
      {lines.map((line) => (
        <li key={line}>{line}</li>
      ))}
    </ul>
  );
}

function Decision({ cycle }: { cycle: Cycle }) {
  const decision = cycle.decision_data.decision;
  if (cycle.state === "rejected" || cycle.awaiting_approval) {
    return (
      <div className={cycle.awaiting_approval ? "cycle-decision awaiting" : "cycle-decision rejected"} data-testid="cycle-decision">
        <strong>{cycle.awaiting_approval ? "Awaiting approval" : "Why it was rejected"}</strong>
        <p>{cycle.decision}</p>
        {decision?.deployed && (
          <p className="small">
            Candidate {decision.candidate.checkpoint}: <strong>{formatRate(decision.candidate.success_rate)}</strong> · deployed{" "}
            {decision.deployed.checkpoint}: <strong>{formatRate(decision.deployed.success_rate)}</strong> · required gain{" "}
            {(decision.margin * 100).toFixed(1)} points
          </p>
        )}
      </div>
    );
  }
  if (!cycle.decision || cycle.state === "failed") return null;
  return (
    <p className={`cycle-decision ${cycle.state}`} data-testid="cycle-decision">
      {cycle.decision}
    </p>
  );
}

/**
 * Deploying a candidate the gate rejected: says what is about to happen, with the numbers, before it
 * does; Cancel has the focus, so Enter or a second click does not deploy by accident.
 */
function ApproveAnywayConfirm({
  cycle,
  pending,
  onConfirm,
  onCancel,
}: {
  cycle: Cycle;
  pending: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const cancel = useRef<HTMLButtonElement>(null);
  useEffect(() => cancel.current?.focus(), []);
  const text = approveAnywayText(cycle);
  return (
    <div
      className="confirm-panel"
      role="alertdialog"
      aria-labelledby={`approve-anyway-${cycle.id}`}
      aria-describedby={`approve-anyway-${cycle.id}-numbers`}
      data-testid="approve-anyway-confirm"
      onKeyDown={(e) => {
        if (e.key === "Escape") onCancel();
      }}
    >
      <strong id={`approve-anyway-${cycle.id}`}>{text.question}</strong>
      <p id={`approve-anyway-${cycle.id}-numbers`} data-testid="approve-anyway-numbers">
        {text.numbers}
      </p>
      <p className="small">
        <span className="muted">The gate's reason: </span>
        <span data-testid="approve-anyway-reason">{text.reason}</span>
      </p>
      <p className="muted small">New episodes use it at once; running ones finish on their checkpoint. You can roll back below.</p>
      <div className="button-row">
        <button type="button" className="button" ref={cancel} onClick={onCancel} data-testid="approve-anyway-cancel">
          Cancel
        </button>
        <button type="button" className="button danger" disabled={pending} onClick={onConfirm} data-testid="approve-anyway-deploy">
          {pending ? "Deploying…" : `Deploy ${cycle.candidate?.name ?? "the candidate"} anyway`}
        </button>
      </div>
    </div>
  );
}

function Actions({ cycle, projectId }: { cycle: Cycle; projectId: number }) {
  const approve = useApproveCycle(projectId);
  const reject = useRejectCycle(projectId);
  const [reason, setReason] = useState("");
  const [confirming, setConfirming] = useState(false);
  const approveButton = useRef<HTMLButtonElement>(null);
  const canApprove = cycle.awaiting_approval || (cycle.state === "rejected" && cycle.candidate !== null);
  if (!canApprove) return null;
  // The gate passed and a manager's word is all that is missing: the plain approve is the main action.
  // The gate refused: approving anyway is possible, but quiet and confirmed first.
  const anyway = !cycle.awaiting_approval;
  return (
    <div className="cycle-actions">
      <div className="inline-form">
        <button
          type="button"
          ref={approveButton}
          className={anyway ? "button" : "button primary"}
          disabled={approve.isPending || confirming}
          aria-expanded={anyway ? confirming : undefined}
          data-testid="approve-candidate"
          onClick={() => (anyway ? setConfirming(true) : approve.mutate(cycle))}
        >
          {approve.isPending && !anyway ? "Deploying…" : anyway ? "Approve candidate anyway…" : "Approve candidate"}
        </button>
        {cycle.awaiting_approval && (
          <>
            <label className="field">
              <span>Reason (optional)</span>
              <input value={reason} onChange={(e) => setReason(e.target.value)} aria-describedby="cycle-reject-limit" data-testid="reject-reason" />
              <LimitCounter kind="reject_reason" value={reason} id="cycle-reject-limit" />
            </label>
            <button
              type="button"
              className="button danger"
              disabled={reject.isPending || isOverLimit("reject_reason", reason)}
              data-testid="reject-candidate"
              onClick={() => reject.mutate({ cycle, reason })}
            >
              Reject candidate
            </button>
          </>
        )}
      </div>
      {anyway && !confirming && (
        <p className="muted small">Approving deploys {cycle.candidate?.name} although the gate turned it down; you can roll back below.</p>
      )}
      {anyway && confirming && (
        <ApproveAnywayConfirm
          cycle={cycle}
          pending={approve.isPending}
          onCancel={() => {
            setConfirming(false);
            // back where the person was (the confirmation is gone, and the focus with it)
            setTimeout(() => approveButton.current?.focus(), 0);
          }}
          onConfirm={() => approve.mutate(cycle, { onSettled: () => setConfirming(false) })}
        />
      )}
      {approve.isError && <ErrorBanner error={approve.error} title="The candidate was not deployed" />}
      {reject.isError && <ErrorBanner error={reject.error} title="The candidate was not rejected" />}
    </div>
  );
}

/** One cycle: its state, steps and timings, live training, evaluations, the decision and what to do after a failure. */
export function CycleCard({ cycle, projectId, manage, open = false }: { cycle: Cycle; projectId: number; manage: boolean; open?: boolean }) {
  const [expanded, setExpanded] = useState(open);
  const active = isCycleActive(cycle);
  const showDetails = expanded || active;
  const warnings = cycle.run ? runWarnings(cycle.run) : [];
  return (
    <li className="card cycle-card" data-testid="cycle" data-state={cycle.state} data-iteration={cycle.iteration}>
      <div className="section-header">
        <h2>Cycle {cycle.iteration}</h2>
        <span className={`badge cycle-${cycle.state}`} data-testid="cycle-state">
          {cycle.awaiting_approval ? "awaiting approval" : cycle.state}
        </span>
        {warnings.length > 0 && (
          <span className="badge status-warning" data-testid="cycle-run-warning" title={warnings.join("\n")}>
            training warning
          </span>
        )}
        <span className="muted small">
          {cycle.trigger}
          {cycle.triggered_by ? ` by ${cycle.triggered_by.username}` : ""}
        </span>
        <div className="header-spacer" />
        <span className="muted small">
          {formatDateTime(cycle.started_at)} · {formatSeconds(cycleSeconds(cycle))}
          {active ? " so far" : ""}
        </span>
        {!active && (
          <button type="button" className="button small subtle" onClick={() => setExpanded(!expanded)} aria-expanded={showDetails}>
            {showDetails ? "Hide details" : "Details"}
          </button>
        )}
      </div>
      <Steps cycle={cycle} />
      {!showDetails && <p className="muted small cycle-summary">{cycleSummary(cycle)}</p>}
      {!showDetails && warnings.length > 0 && (
        <p className="small warn-text" data-testid="cycle-run-warning-line">
          Training {cycle.run?.status === "succeeded" ? "finished with a warning" : "warned"}: {warnings[0]}
          {warnings.length > 1 ? ` (and ${warnings.length - 1} more under Details)` : ""}
        </p>
      )}
      {showDetails && (
        <>
          <StateProgress cycle={cycle} />
          <Decision cycle={cycle} />
          {manage && <Actions cycle={cycle} projectId={projectId} />}
          {cycle.state === "failed" && (
            <div data-testid="cycle-failure">
              <ErrorBanner title={`The cycle failed`} message={cycle.error || "It stopped without saying why."} />
              <p data-testid="cycle-next-steps">
                <strong>What to do next: </strong>
                {failureAdvice(cycle)}
              </p>
              {cycle.log_tail && failedStep(cycle) !== "train" && (
                <details open>
                  <summary>Last lines of the log</summary>
                  <pre className="log-tail" data-testid="cycle-log">
                    {cycle.log_tail}
                  </pre>
                </details>
              )}
            </div>
          )}
          {cycle.snapshots.some((s) => s.status === "ready") && (
            <p className="muted small">
              Trained on{" "}
              {cycle.snapshots
                .filter((s) => s.status === "ready")
                .map((s) => `${s.kind.toUpperCase()} snapshot #${s.id} (${s.rows.toLocaleString()} rows)`)
                .join(", ")}
              {cycle.candidate ? ` → candidate ${cycle.candidate.name}` : ""}
              {cycle.baseline ? `; compared with ${cycle.baseline.name}` : ""}
            </p>
          )}
          <TrainingData cycle={cycle} />
          {cycle.run && (
            <ul className="run-list cycle-run">
              <RunCard run={cycle.run} />
            </ul>
          )}
          <EvaluationTable cycle={cycle} />
          <LearnedTable cycle={cycle} />
        </>
      )}
    </li>
  );
}
