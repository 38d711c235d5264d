import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useNavigate } from "react-router";
import { ApiError, episodeStart } from "../api/client";
import { EPISODE_MODES, type Episode, type EpisodeMode } from "../api/types";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { useTasks } from "../components/projectQueries";
import { parseSeeds } from "./seeds";

/**
 * Start episodes of a task; a single episode opens its live session straight away. Supervised is
 * the default (the person approves each step); only managers may start autonomous batches, so
 * others are not offered the choice (the server answers 403 to them anyway).
 */
export function StartEpisodeForm({
  projectId,
  onDone,
  canStartAutonomous = false,
}: {
  projectId: number;
  onDone?: () => void;
  canStartAutonomous?: boolean;
}) {
  const tasks = useTasks(projectId);
  const client = useQueryClient();
  const navigate = useNavigate();
  const [taskId, setTaskId] = useState<string>("");
  const [seedText, setSeedText] = useState("0");
  const [mode, setMode] = useState<EpisodeMode>("supervised");
  const [seedError, setSeedError] = useState<string | null>(null);

  const chosenTask = tasks.data?.find((t) => String(t.id) === taskId) ?? tasks.data?.[0];
  const start = useMutation({
    mutationFn: (seeds: number[]) =>
      episodeStart(projectId, { task: chosenTask!.id, seeds, mode: canStartAutonomous ? mode : "supervised" }),
    onSuccess: ({ results }: { results: Episode[] }) => {
      client.invalidateQueries({ queryKey: ["episodes"] });
      if (results.length === 1) navigate(`/episodes/${results[0].id}`);
      else onDone?.();
    },
  });

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!chosenTask) return;
    const parsed = parseSeeds(seedText, { start: chosenTask.seed_start, end: chosenTask.seed_end });
    if (!parsed.ok) {
      setSeedError(parsed.error);
      return;
    }
    setSeedError(null);
    start.mutate(parsed.seeds);
  }
  const effectiveMode: EpisodeMode = canStartAutonomous ? mode : "supervised";

  if (tasks.isPending) return <Spinner label="Loading tasks…" />;
  if (tasks.isError) return <ErrorBanner error={tasks.error} onRetry={() => tasks.refetch()} />;
  if (tasks.data.length === 0) {
    return (
      <div className="card">
        <p>This project has no tasks yet. A manager adds them on the project page.</p>
        {onDone && (
          <button type="button" className="button subtle" onClick={onDone}>
            Close
          </button>
        )}
      </div>
    );
  }

  const errors = start.error instanceof ApiError ? start.error.fieldErrors : {};
  return (
    <form className="card form-grid" onSubmit={submit} aria-label="Start episode" data-testid="start-form">
      {start.error && <ErrorBanner error={start.error} fieldErrors={{}} title="Could not start the episode" />}
      <label className="field">
        <span>Task</span>
        <select
          data-testid="start-task"
          value={chosenTask ? String(chosenTask.id) : ""}
          onChange={(e) => setTaskId(e.target.value)}
        >
          {tasks.data.map((t) => (
            <option key={t.id} value={String(t.id)}>
              {t.task_name} ({t.env_kind}, {t.split})
            </option>
          ))}
        </select>
        {errors.task && <span className="field-error">{errors.task.join(" ")}</span>}
      </label>
      <label className="field">
        <span>{canStartAutonomous ? "Seeds" : "Seed"}</span>
        <input
          data-testid="start-seed"
          value={seedText}
          onChange={(e) => setSeedText(e.target.value)}
          aria-describedby="seed-help"
          aria-invalid={Boolean(seedError || errors.seeds)}
          inputMode="numeric"
        />
        <span id="seed-help" className="muted small">
          {chosenTask ? `One seed, a list or a range (allowed ${chosenTask.seed_start}–${chosenTask.seed_end}).` : ""}
        </span>
        {(seedError || errors.seeds) && (
          <span className="field-error">{seedError ?? errors.seeds.join(" ")}</span>
        )}
      </label>
      {canStartAutonomous ? (
        <label className="field">
          <span>Mode</span>
          <select data-testid="start-mode" value={mode} onChange={(e) => setMode(e.target.value as EpisodeMode)}>
            {EPISODE_MODES.map((m) => (
              <option key={m} value={m}>
                {m === "supervised" ? "supervised (approve each step)" : "autonomous (agent runs alone)"}
              </option>
            ))}
          </select>
          {errors.mode && <span className="field-error">{errors.mode.join(" ")}</span>}
        </label>
      ) : (
        <div className="field">
          <span>Mode</span>
          <span>Supervised: you approve, edit or reject each step the agent proposes.</span>
          <span className="muted small">Managers start autonomous batches.</span>
        </div>
      )}
      <div className="form-actions span-2">
        <button type="submit" className="button primary" data-testid="start-submit" disabled={start.isPending}>
          {start.isPending ? "Starting…" : effectiveMode === "supervised" ? "Start supervised episode" : "Start autonomous batch"}
        </button>
        {onDone && (
          <button type="button" className="button subtle" onClick={onDone} disabled={start.isPending}>
            Cancel
          </button>
        )}
      </div>
    </form>
  );
}
