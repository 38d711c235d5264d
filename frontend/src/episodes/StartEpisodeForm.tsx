import { useMutation, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { useNavigate } from "react-router";
import { type Episode, EPISODE_MODES, episodeKeys, type EpisodeMode, episodeStart } from "../api/episodes";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { useServerErrors } from "../components/useServerErrors";
import { Spinner } from "../components/Spinner";
import { useTasks } from "../components/projectQueries";
import { parseSeeds, seedHelp } from "./seeds";

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
      client.invalidateQueries({ queryKey: episodeKeys.lists() });
      if (results.length === 1) navigate(`/episodes/${results[0].id}`);
      else onDone?.();
    },
  });

  const effectiveMode: EpisodeMode = canStartAutonomous ? mode : "supervised";
  const server = useServerErrors(start.error);

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!chosenTask) return;
    const parsed = parseSeeds(seedText, { start: chosenTask.seed_start, end: chosenTask.seed_end },
      { single: effectiveMode === "supervised" });
    if (!parsed.ok) {
      setSeedError(parsed.error);
      return;
    }
    setSeedError(null);
    start.mutate(parsed.seeds);
  }

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

  const errors = server.errors;
  return (
    <form className="card form-grid" onSubmit={submit} aria-label="Start episode" data-testid="start-form">
      <Field label="Task" problems={errors.task}>
        {(control) => (
          <select
            {...control}
            data-testid="start-task"
            value={chosenTask ? String(chosenTask.id) : ""}
            onChange={(e) => {
              setTaskId(e.target.value);
              server.clear("task", "seeds");
              setSeedError(null);
            }}
          >
            {tasks.data.map((t) => (
              <option key={t.id} value={String(t.id)}>
                {t.task_name} ({t.env_kind}, {t.split})
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field
        label={effectiveMode === "supervised" ? "Seed" : "Seeds"}
        help={chosenTask ? <span data-testid="seed-help">{seedHelp(effectiveMode, chosenTask)}</span> : undefined}
        problems={seedError ?? errors.seeds}
      >
        {(control) => (
          <input
            {...control}
            data-testid="start-seed"
            value={seedText}
            onChange={(e) => {
              setSeedText(e.target.value);
              setSeedError(null);
              server.clear("seeds");
            }}
            inputMode="numeric"
          />
        )}
      </Field>
      {canStartAutonomous ? (
        <Field label="Mode" problems={errors.mode}>
          {(control) => (
            <select
              {...control}
              data-testid="start-mode"
              value={mode}
              onChange={(e) => {
                setMode(e.target.value as EpisodeMode);
                setSeedError(null);
                server.clear("mode", "seeds");
              }}
            >
              {EPISODE_MODES.map((m) => (
                <option key={m} value={m}>
                  {m === "supervised" ? "supervised (approve each step)" : "autonomous (agent runs alone)"}
                </option>
              ))}
            </select>
          )}
        </Field>
      ) : (
        <div className="field">
          <span>Mode</span>
          <span>Supervised: you approve, edit or reject each step the agent proposes.</span>
          <span className="muted small">Managers start autonomous batches.</span>
        </div>
      )}
      {start.error && (
        <div className="span-2">
          <ErrorBanner
            error={start.error}
            fieldErrors={errors}
            besideFields={["task", "seeds", "mode"]}
            title="Could not start the episode"
          />
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
