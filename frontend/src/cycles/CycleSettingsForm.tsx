import { useEffect, useState } from "react";
import type { CycleSettings, RecipeStage, TrainAlgorithm } from "../api/cycles";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { formatDateTime } from "../components/format";
import { useServerErrors } from "../components/useServerErrors";
import { useSaveCycleSettings } from "./queries";

const ALGORITHMS: { algorithm: TrainAlgorithm; label: string; data: string }[] = [
  { algorithm: "sft", label: "SFT", data: "SFT + RFT rows (V=1 episodes)" },
  { algorithm: "dpo", label: "DPO", data: "correction pairs (every edited step)" },
  { algorithm: "rl", label: "RL", data: "on-policy autonomous episodes" },
];

interface StageDraft {
  on: boolean;
  maxSteps: string;
  /** Passes over the stage's rows at most; not asked of RL, which trains on fresh batches. */
  maxEpochs: string;
  lr: string;
}

/** The server's default cap on passes over a stage's rows (flywheel/training.py DEFAULT_MAX_EPOCHS). */
export const DEFAULT_MAX_EPOCHS = 5;
const MAX_EPOCHS_LIMIT = 1000;
const EPOCHS_HELP =
  "the stage stops after this many passes over its rows, whatever max steps says: a few rows trained for hundreds of steps are memorised. 0: no cap.";
const hasEpochs = (algorithm: TrainAlgorithm) => algorithm !== "rl";

/** The SFT mix's knobs (flywheel/replay.py), each with what it does; shown under "Training data". */
type DataKey = "replay_ratio" | "replay_max_rows" | "correction_weight" | "val_fraction" | "val_min_rows" | "patience";
export const DATA_KNOBS: { key: DataKey; label: string; help: string; whole: boolean; min: number; max: number }[] = [
  { key: "replay_ratio", label: "Replayed rows per new row", whole: false, min: 0, max: 100,
    help: "rows of what the deployed checkpoint was trained on (its snapshots, the cold start's demonstrations), mixed in so it does not forget them; 0: none." },
  { key: "replay_max_rows", label: "Mix size at most (rows)", whole: true, min: 1, max: 10_000_000,
    help: "the new rows and the replayed ones together; the replay is cut first." },
  { key: "correction_weight", label: "Weight of a corrected step", whole: true, min: 1, max: 100,
    help: "each row of a step a person edited or took over counts this many times: approved steps are the checkpoint's own answers, corrections are where it was wrong." },
  { key: "val_fraction", label: "Held out for validation (share, 0-0.5)", whole: false, min: 0, max: 0.5,
    help: "rows kept out of training whose loss is measured at every progress line; 0: none (and no early stopping)." },
  { key: "val_min_rows", label: "Held out at least (rows)", whole: true, min: 1, max: 10_000,
    help: "with fewer than 8 new rows nothing is held out." },
  { key: "patience", label: "Stop after checks without improvement", whole: true, min: 0, max: 1000,
    help: "SFT stops when the validation loss has not improved for this many progress lines, and the candidate keeps its best weights; 0: never stop early." },
];
const VAL_FROM_HELP: Record<"corrected" | "new", string> = {
  corrected: "some of the steps people corrected, plus as many replayed rows: the loss falls while the model learns the corrections and rises when it forgets what it knew (fewer than 4 corrections: a sample of the new rows).",
  new: "a sample of all new rows: mostly approved steps the checkpoint already predicts, so it mostly measures forgetting.",
};

export interface Draft {
  data: Record<DataKey, string>;
  valFrom: "corrected" | "new";
  minNewRows: string;
  cadence: string;
  margin: string;
  evalSeeds: string;
  evalMaxSteps: string;
  autoDeploy: boolean;
  evalTasks: number[];
  backend: "local" | "openai";
  exportAs: "lora" | "full";
  baseCheckpoint: string;
  stages: Record<TrainAlgorithm, StageDraft>;
}

export function draftOf(settings: CycleSettings): Draft {
  const stage = (algorithm: TrainAlgorithm): StageDraft => {
    const found = settings.recipe.find((s) => s.algorithm === algorithm);
    return {
      on: Boolean(found),
      maxSteps: String(found?.max_steps ?? 100),
      maxEpochs: String(found?.max_epochs ?? DEFAULT_MAX_EPOCHS),
      lr: found?.lr !== undefined ? String(found.lr) : "",
    };
  };
  return {
    data: Object.fromEntries(DATA_KNOBS.map(({ key }) => [key, String(settings[key])])) as Record<DataKey, string>,
    valFrom: settings.val_from,
    minNewRows: String(settings.min_new_rows),
    cadence: String(settings.cadence_minutes ?? 0),
    margin: String(Math.round(settings.margin * 1000) / 10),
    evalSeeds: String(settings.eval_seeds),
    evalMaxSteps: String(settings.eval_max_steps),
    autoDeploy: settings.auto_deploy,
    evalTasks: settings.eval_tasks,
    backend: settings.backend,
    exportAs: settings.export,
    baseCheckpoint: settings.base_checkpoint === null ? "" : String(settings.base_checkpoint),
    stages: { sft: stage("sft"), dpo: stage("dpo"), rl: stage("rl") },
  };
}

const whole = (text: string) => (/^\d+$/.test(text.trim()) ? Number(text) : NaN);

/** The server's name of each draft field: its messages show beside that field and go when it is changed. */
const SERVER_FIELD: Partial<Record<keyof Draft, string>> = {
  minNewRows: "min_new_rows", cadence: "cadence_minutes", margin: "margin", evalSeeds: "eval_seeds",
  evalMaxSteps: "eval_max_steps", autoDeploy: "auto_deploy", evalTasks: "eval_tasks", backend: "backend",
  exportAs: "export", baseCheckpoint: "base_checkpoint", valFrom: "val_from", stages: "recipe",
};
/** Every field the form shows messages beside (the banner under it repeats none of them). */
const BESIDE = [...Object.values(SERVER_FIELD), ...DATA_KNOBS.map((k) => k.key),
  ...(["sft", "dpo", "rl"] as const).map((a) => `stage_${a}`)];

/**
 * What is wrong with the draft, by field (the server's field names; `stage_<algorithm>` for a recipe stage's
 * numbers): each problem is shown beside its field, once. Empty when the draft can be saved.
 */
export function draftProblems(draft: Draft, recipe: RecipeStage[]): Record<string, string[]> {
  const problems: Record<string, string[]> = {};
  const add = (field: string, message: string) => (problems[field] ??= []).push(message);
  if (Number.isNaN(whole(draft.minNewRows))) add("min_new_rows", "Use a whole number.");
  if (Number.isNaN(whole(draft.cadence))) add("cadence_minutes", "Use a whole number of minutes (0 for manual runs only).");
  const margin = Number(draft.margin);
  if (draft.margin.trim() === "" || !Number.isFinite(margin) || margin < 0 || margin > 100) add("margin", "Use points of success rate, from 0 to 100.");
  if (Number.isNaN(whole(draft.evalSeeds))) add("eval_seeds", "Use a whole number.");
  if (Number.isNaN(whole(draft.evalMaxSteps))) add("eval_max_steps", "Use a whole number (0: the task's own).");
  if (recipe.length === 0) add("recipe", "Choose at least one training stage.");
  for (const stage of recipe) {
    if (Number.isNaN(stage.max_steps)) add(`stage_${stage.algorithm}`, "Max steps must be a whole number.");
    if (stage.max_epochs !== undefined && (Number.isNaN(stage.max_epochs) || stage.max_epochs > MAX_EPOCHS_LIMIT)) {
      add(`stage_${stage.algorithm}`, `Max epochs is a whole number from 0 to ${MAX_EPOCHS_LIMIT} (0: no cap).`);
    }
    if (stage.lr !== undefined && !Number.isFinite(stage.lr)) add(`stage_${stage.algorithm}`, "The learning rate must be a number.");
  }
  const data = dataOf(draft);
  for (const knob of DATA_KNOBS) {
    const value = data[knob.key];
    if (!Number.isFinite(value) || value < knob.min || value > knob.max)
      add(knob.key, `Use ${knob.whole ? "a whole number" : "a number"} from ${knob.min} to ${knob.max.toLocaleString()}.`);
  }
  if (data.patience > 0 && data.val_fraction === 0 && !problems.patience) {
    add("patience", "Stopping early reads the validation loss: hold some rows out, or set the checks to 0.");
  }
  return problems;
}

function dataOf(draft: Draft): Record<DataKey, number> {
  return Object.fromEntries(
    DATA_KNOBS.map(({ key, whole: isWhole }) => [key, isWhole ? whole(draft.data[key]) : draft.data[key].trim() === "" ? NaN : Number(draft.data[key])]),
  ) as Record<DataKey, number>;
}

/** A field's messages, beside it; nothing when it has none. */
function FieldProblems({ messages, testId }: { messages: string[]; testId?: string }) {
  return messages.length ? (
    <span className="field-error" data-testid={testId}>
      {messages.join(" ")}
    </span>
  ) : null;
}

/** The project's cycle settings: when to run, what to train, how to measure, how to decide. */
export function CycleSettingsForm({ projectId, settings, manage }: { projectId: number; settings: CycleSettings; manage: boolean }) {
  const save = useSaveCycleSettings(projectId);
  const server = useServerErrors(save.error);
  const [draft, setDraft] = useState<Draft>(() => draftOf(settings));
  useEffect(() => setDraft(draftOf(settings)), [settings]);
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => {
    setDraft((d) => ({ ...d, [key]: value }));
    if (SERVER_FIELD[key]) server.clear(SERVER_FIELD[key]);
  };
  const setStage = (algorithm: TrainAlgorithm, change: Partial<StageDraft>) => {
    setDraft((d) => ({ ...d, stages: { ...d.stages, [algorithm]: { ...d.stages[algorithm], ...change } } }));
    server.clear("recipe");
  };
  const setKnob = (key: DataKey, value: string) => {
    setDraft((d) => ({ ...d, data: { ...d.data, [key]: value } }));
    server.clear(key, ...(key === "val_fraction" ? ["patience"] : []));
  };

  const recipe: RecipeStage[] = ALGORITHMS.filter(({ algorithm }) => draft.stages[algorithm].on).map(({ algorithm }) => {
    const stage = draft.stages[algorithm];
    // what the form does not edit (batch tokens, the gate's min rows, LoRA, GRPO's options) stays as stored
    const stored = settings.recipe.find((s) => s.algorithm === algorithm);
    const out: RecipeStage = { ...stored, algorithm, max_steps: whole(stage.maxSteps) };
    if (hasEpochs(algorithm)) out.max_epochs = whole(stage.maxEpochs);
    if (stage.lr.trim()) out.lr = Number(stage.lr);
    else delete out.lr;
    return out;
  });
  const problems = draftProblems(draft, recipe);
  const problemCount = Object.values(problems).reduce((n, list) => n + list.length, 0);
  const margin = Number(draft.margin);
  const data = dataOf(draft);
  /** Every message about one field: the page's own first, then the server's. */
  const said = (field: string) => [...(problems[field] ?? []), ...(server.errors[field] ?? [])];
  const dataOpen = DATA_KNOBS.some((k) => said(k.key).length > 0) || said("val_from").length > 0;
  const servingOpen = ["backend", "export", "base_checkpoint"].some((field) => said(field).length > 0);
  const gate = settings.gate;

  return (
    <form
      className="card cycle-settings"
      data-testid="cycle-settings"
      onSubmit={(e) => {
        e.preventDefault();
        if (problemCount) return;
        save.mutate({
          min_new_rows: whole(draft.minNewRows),
          cadence_minutes: whole(draft.cadence),
          margin: Math.round(margin * 10) / 1000,
          eval_seeds: whole(draft.evalSeeds),
          eval_max_steps: whole(draft.evalMaxSteps),
          auto_deploy: draft.autoDeploy,
          eval_tasks: draft.evalTasks,
          recipe,
          backend: draft.backend,
          export: draft.exportAs,
          base_checkpoint: draft.baseCheckpoint.trim() ? Number(draft.baseCheckpoint) : null,
          ...data,
          val_from: draft.valFrom,
        });
      }}
    >
      <p className="muted small" data-testid="cycle-gate-now">
        Now: {gate.new_rows.toLocaleString()} new routed row{gate.new_rows === 1 ? "" : "s"} since the last trained cycle (
        {Object.entries(gate.buckets)
          .map(([kind, b]) => `${kind.toUpperCase()} ${b.new_rows} new of ${b.rows}`)
          .join(", ")}
        ); a cycle trains when there are at least {gate.min_new_rows}. Schedule: {settings.schedule}
        {settings.last_scheduled_at ? `, last checked ${formatDateTime(settings.last_scheduled_at)}` : ""}.
      </p>
      {settings.eval_plan_error ? (
        <ErrorBanner title="Cycles cannot run yet" message={settings.eval_plan_error} />
      ) : (
        <p className="muted small" data-testid="cycle-eval-plan">
          Evaluation: {settings.eval_plan.map((g) => `${g.tasks.join(", ")} on seeds ${g.seeds} (≤ ${g.max_steps} steps)`).join("; ")}, the
          same seeds for the candidate and the deployed checkpoint in every cycle.
        </p>
      )}
      <fieldset disabled={!manage || save.isPending} className="cycle-settings-fields">
        <div className="form-grid">
          <Field label="Run a cycle every (minutes; 0: only by hand)" problems={said("cadence_minutes")}>
            {(control) => (
              <input {...control} inputMode="numeric" value={draft.cadence} onChange={(e) => set("cadence", e.target.value)} data-testid="setting-cadence" />
            )}
          </Field>
          <Field label="New routed rows needed" problems={said("min_new_rows")}>
            {(control) => (
              <input {...control} inputMode="numeric" value={draft.minNewRows} onChange={(e) => set("minNewRows", e.target.value)} data-testid="setting-min-rows" />
            )}
          </Field>
          <Field label="Required gain over the deployed checkpoint (points of success rate)" problems={said("margin")}>
            {(control) => (
              <input {...control} inputMode="decimal" value={draft.margin} onChange={(e) => set("margin", e.target.value)} data-testid="setting-margin" />
            )}
          </Field>
          <label className="field inline">
            <input type="checkbox" checked={draft.autoDeploy} onChange={(e) => set("autoDeploy", e.target.checked)} data-testid="setting-auto-deploy" />
            <span>Deploy a candidate that passes the gate automatically (off: a manager approves each one)</span>
            <FieldProblems messages={said("auto_deploy")} />
          </label>
          <Field label="Eval seeds per task" problems={said("eval_seeds")}>
            {(control) => (
              <input {...control} inputMode="numeric" value={draft.evalSeeds} onChange={(e) => set("evalSeeds", e.target.value)} data-testid="setting-eval-seeds" />
            )}
          </Field>
          <Field label="Eval step limit (0: each task's own)" problems={said("eval_max_steps")}>
            {(control) => (
              <input {...control} inputMode="numeric" value={draft.evalMaxSteps} onChange={(e) => set("evalMaxSteps", e.target.value)} data-testid="setting-eval-steps" />
            )}
          </Field>
        </div>
        {settings.eval_task_choices.length > 0 && (
          <fieldset className="cycle-eval-tasks">
            <legend>Eval tasks (none ticked: all of them)</legend>
            {settings.eval_task_choices.map((t) => (
              <label key={t.id} className="field inline">
                <input
                  type="checkbox"
                  checked={draft.evalTasks.includes(t.id)}
                  onChange={(e) => set("evalTasks", e.target.checked ? [...draft.evalTasks, t.id] : draft.evalTasks.filter((id) => id !== t.id))}
                />
                <span>
                  {t.task_name} <span className="muted small">seeds {t.seed_start}–{t.seed_end}</span>
                </span>
              </label>
            ))}
            <FieldProblems messages={said("eval_tasks")} testId="problem-eval_tasks" />
          </fieldset>
        )}
        <fieldset className="cycle-recipe">
          <legend>Recipe: the stages run in this order, each from the last one's weights</legend>
          {ALGORITHMS.map(({ algorithm, label, data }) => (
            <div key={algorithm} className="cycle-recipe-stage inline-form" data-testid={`stage-${algorithm}`}>
              <label className="field inline">
                <input type="checkbox" checked={draft.stages[algorithm].on} onChange={(e) => setStage(algorithm, { on: e.target.checked })} />
                <span>
                  <strong>{label}</strong> <span className="muted small">on {data}</span>
                </span>
              </label>
              <label className="field">
                <span>max steps</span>
                <input
                  inputMode="numeric"
                  value={draft.stages[algorithm].maxSteps}
                  disabled={!draft.stages[algorithm].on}
                  onChange={(e) => setStage(algorithm, { maxSteps: e.target.value })}
                  data-testid={`stage-${algorithm}-steps`}
                />
              </label>
              {hasEpochs(algorithm) && (
                <label className="field" title={`Max epochs: ${EPOCHS_HELP}`}>
                  <span>max epochs (0: no cap)</span>
                  <input
                    type="number"
                    min={0}
                    max={MAX_EPOCHS_LIMIT}
                    step={1}
                    value={draft.stages[algorithm].maxEpochs}
                    disabled={!draft.stages[algorithm].on}
                    onChange={(e) => setStage(algorithm, { maxEpochs: e.target.value })}
                    aria-describedby="recipe-epochs-help"
                    data-testid={`stage-${algorithm}-epochs`}
                  />
                </label>
              )}
              <label className="field">
                <span>learning rate (blank: trainer default)</span>
                <input
                  inputMode="decimal"
                  value={draft.stages[algorithm].lr}
                  disabled={!draft.stages[algorithm].on}
                  onChange={(e) => setStage(algorithm, { lr: e.target.value })}
                />
              </label>
              <FieldProblems messages={said(`stage_${algorithm}`)} testId={`problem-stage_${algorithm}`} />
            </div>
          ))}
          <FieldProblems messages={said("recipe")} testId="problem-recipe" />
          <p className="muted small" id="recipe-epochs-help" data-testid="recipe-epochs-help">
            Max epochs: {EPOCHS_HELP}
          </p>
        </fieldset>
        <details className="cycle-data" data-testid="cycle-data-settings" open={dataOpen || undefined}>
          <summary>
            Training data (SFT): {draft.data.replay_ratio} replayed rows a new one, corrected steps ×{draft.data.correction_weight}, validation on{" "}
            {draft.valFrom === "corrected" ? "held-out corrections and replayed rows" : "a sample of the new rows"}
          </summary>
          <div className="form-grid">
            {DATA_KNOBS.map((knob) => (
              <Field key={knob.key} label={knob.label} help={knob.help} problems={said(knob.key)} testId={`field-${knob.key}`}>
                {(control) => (
                  <input
                    {...control}
                    inputMode={knob.whole ? "numeric" : "decimal"}
                    value={draft.data[knob.key]}
                    onChange={(e) => setKnob(knob.key, e.target.value)}
                    data-testid={`setting-${knob.key}`}
                  />
                )}
              </Field>
            ))}
            <Field label="Validation reads" help={VAL_FROM_HELP[draft.valFrom]} problems={said("val_from")}>
              {(control) => (
                <select {...control} value={draft.valFrom} onChange={(e) => set("valFrom", e.target.value as Draft["valFrom"])} data-testid="setting-val_from">
                  <option value="corrected">held-out corrections and replayed rows</option>
                  <option value="new">a sample of the new rows</option>
                </select>
              )}
            </Field>
          </div>
        </details>
        <details className="cycle-serving" open={servingOpen || undefined}>
          <summary>Serving: {draft.backend === "openai" ? `openai (vLLM), ${draft.exportAs === "lora" ? "LoRA adapter" : "full weights"}` : "local (in the rollout workers)"}</summary>
          <div className="inline-form">
            <label className="field">
              <span>Backend</span>
              <select value={draft.backend} onChange={(e) => set("backend", e.target.value as Draft["backend"])} data-testid="setting-backend">
                <option value="local">local: the rollout workers reload the checkpoint</option>
                <option value="openai">openai: load it into the running vLLM server</option>
              </select>
              <FieldProblems messages={said("backend")} />
            </label>
            <label className="field">
              <span>Export</span>
              <select value={draft.exportAs} disabled={draft.backend !== "openai"} onChange={(e) => set("exportAs", e.target.value as Draft["exportAs"])}>
                <option value="lora">LoRA adapter (vLLM runtime loading)</option>
                <option value="full">full weights</option>
              </select>
              <FieldProblems messages={said("export")} />
            </label>
            <label className="field">
              <span>Base checkpoint id (what the server was started with)</span>
              <input inputMode="numeric" value={draft.baseCheckpoint} disabled={draft.backend !== "openai"} onChange={(e) => set("baseCheckpoint", e.target.value)} data-testid="setting-base-checkpoint" />
              <FieldProblems messages={said("base_checkpoint")} testId="problem-base_checkpoint" />
            </label>
          </div>
        </details>
      </fieldset>
      {save.isError && (
        <ErrorBanner error={save.error} fieldErrors={server.errors} besideFields={BESIDE} title="The settings were not saved" />
      )}
      {manage ? (
        <div className="form-actions">
          <button type="submit" className="button primary" disabled={problemCount > 0 || save.isPending} data-testid="cycle-settings-save">
            {save.isPending ? "Saving…" : "Save settings"}
          </button>
          {problemCount > 0 && (
            // where to look, not the messages again: each is beside its field
            <span className="field-error" data-testid="cycle-settings-problems">
              {problemCount === 1 ? "One field above says what to fix before saving." : `${problemCount} fields above say what to fix before saving.`}
            </span>
          )}
          {save.isSuccess && <span className="muted small" data-testid="cycle-settings-saved">Saved; the next cycle uses them.</span>}
        </div>
      ) : (
        <p className="muted small">Only the project's managers change these settings.</p>
      )}
    </form>
  );
}
