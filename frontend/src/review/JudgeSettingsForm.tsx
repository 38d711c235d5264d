import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { type JudgeBackend, judgeKeys, type JudgeSettings, judgeSettingsGet, judgeSettingsSet } from "../api/judge";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { Spinner } from "../components/Spinner";
import { useServerErrors } from "../components/useServerErrors";

/** What the form edits of the judge's settings (flywheel/judge.py; the rest stays as it is). */
export interface JudgeForm {
  enabled: boolean;
  backend: JudgeBackend;
  samples: string;
  screenshots: string;
  temperature: string;
  model: string;
  base_url: string;
}

const LIMITS = { samples: [1, 15], screenshots: [0, 10] } as const;

export function formOf(settings: JudgeSettings): JudgeForm {
  return {
    enabled: settings.enabled,
    backend: settings.backend,
    samples: String(settings.samples),
    screenshots: String(settings.screenshots),
    temperature: String(settings.temperature),
    model: settings.model,
    base_url: settings.base_url,
  };
}

/** Each field's problem in words, as the server would refuse it; empty when the form can be saved. */
export function judgeFormProblems(form: JudgeForm): Partial<Record<keyof JudgeForm, string>> {
  const problems: Partial<Record<keyof JudgeForm, string>> = {};
  for (const key of ["samples", "screenshots"] as const) {
    const [low, high] = LIMITS[key];
    const value = Number(form[key]);
    if (form[key].trim() === "" || !Number.isInteger(value) || value < low || value > high) {
      problems[key] = `Use a whole number from ${low} to ${high}.`;
    }
  }
  const temperature = Number(form.temperature);
  if (form.temperature.trim() === "" || !Number.isFinite(temperature) || temperature < 0 || temperature > 2) {
    problems.temperature = "Use a number from 0 to 2.";
  }
  if (form.backend === "openai" && !form.model.trim()) {
    problems.model = "The openai judge needs the name of the model the server serves.";
  }
  if (form.base_url.trim() && !/^https?:\/\//.test(form.base_url.trim())) {
    problems.base_url = "Use an http:// or https:// URL, or leave it empty for LOUPE_OPENAI_BASE_URL.";
  }
  return problems;
}

/** The PATCH body: only the fields that changed, typed as the server reads them. */
export function judgeChanges(form: JudgeForm, saved: JudgeSettings): Partial<JudgeSettings> {
  const next: Partial<JudgeSettings> = {
    enabled: form.enabled,
    backend: form.backend,
    samples: Number(form.samples),
    screenshots: Number(form.screenshots),
    temperature: Number(form.temperature),
    model: form.model.trim(),
    base_url: form.base_url.trim(),
  };
  return Object.fromEntries(
    Object.entries(next).filter(([key, value]) => saved[key as keyof JudgeSettings] !== value),
  ) as Partial<JudgeSettings>;
}

function Editor({ projectId, saved }: { projectId: number; saved: JudgeSettings }) {
  const client = useQueryClient();
  const [form, setForm] = useState<JudgeForm>(() => formOf(saved));
  const save = useMutation({
    mutationFn: (changes: Partial<JudgeSettings>) => judgeSettingsSet(projectId, changes),
    onSuccess: (settings) => {
      client.setQueryData(judgeKeys.settings(projectId), settings);
      setForm(formOf(settings));
    },
  });
  const problems = judgeFormProblems(form);
  const changes = judgeChanges(form, saved);
  const dirty = Object.keys(changes).length > 0;
  const server = useServerErrors(save.error);
  const set = (patch: Partial<JudgeForm>) => {
    setForm({ ...form, ...patch });
    server.clear(...Object.keys(patch));
  };
  /** The page's own problem with a field, else the server's: beside it, once. */
  const problemOf = (field: keyof JudgeForm) => problems[field] ?? server.errors[field]?.join(" ");
  // labels are tied to their controls (htmlFor/id): a control's name is its label, its help and problem describe it
  const number = (field: "samples" | "screenshots" | "temperature", label: string, help: string) => (
    <Field label={label} help={help} problems={problemOf(field)} problemsTestId={`judge-${field}-error`}>
      {(control) => (
        <input
          {...control}
          type="number"
          value={form[field]}
          step={field === "temperature" ? "0.1" : "1"}
          data-testid={`judge-${field}`}
          onChange={(e) => set({ [field]: e.target.value })}
        />
      )}
    </Field>
  );
  return (
    <form
      className="judge-settings"
      aria-label="Judge settings"
      data-testid="judge-settings-form"
      noValidate // the fields' problems are said beside them, in words (judgeFormProblems)
      onSubmit={(e) => {
        e.preventDefault();
        if (Object.keys(problems).length || !dirty) return;
        save.mutate(changes);
      }}
    >
      <label className="freeze-check">
        <input type="checkbox" checked={form.enabled} data-testid="judge-enabled" onChange={(e) => set({ enabled: e.target.checked })} />
        Judge every episode when it finishes
      </label>
      <div className="freeze-grid">
        <Field label="Judge" problems={problemOf("backend")} problemsTestId="judge-backend-error">
          {(control) => (
            <select {...control} value={form.backend} data-testid="judge-backend" onChange={(e) => set({ backend: e.target.value as JudgeBackend })}>
              <option value="rule">rule: the reward or the outcome (no model)</option>
              <option value="openai">openai: a vision-language model (vLLM)</option>
              {saved.backend === "scripted" && <option value="scripted">scripted: given answers (tests, demos)</option>}
            </select>
          )}
        </Field>
        {number("samples", "Votes (k)", "Asked k times; the majority wins, its share is the confidence.")}
        {number("screenshots", "Last screenshots", "How many of the episode's last screenshots it sees (0-10).")}
        {number("temperature", "Temperature", "Sampling temperature of each vote (0-2).")}
        {form.backend === "openai" && (
          <>
            <Field label="Model" problems={problemOf("model")} problemsTestId="judge-model-error">
              {(control) => (
                <input {...control} value={form.model} data-testid="judge-model" placeholder="e.g. Qwen2.5-VL-7B-Instruct" onChange={(e) => set({ model: e.target.value })} />
              )}
            </Field>
            <Field label="Server (optional)" problems={problemOf("base_url")} problemsTestId="judge-base_url-error">
              {(control) => (
                <input {...control} value={form.base_url} data-testid="judge-base_url" placeholder="LOUPE_OPENAI_BASE_URL" onChange={(e) => set({ base_url: e.target.value })} />
              )}
            </Field>
          </>
        )}
      </div>
      {save.isError && (
        <ErrorBanner
          error={save.error}
          fieldErrors={server.errors}
          besideFields={["backend", "samples", "screenshots", "temperature", "model", "base_url"]}
          title="The judge settings were not changed"
        />
      )}
      <div className="form-actions">
        <button
          type="submit"
          className="button primary small"
          disabled={!dirty || Object.keys(problems).length > 0 || save.isPending}
          data-testid="judge-save"
        >
          {save.isPending ? "Saving…" : "Save judge settings"}
        </button>
        {save.isSuccess && !dirty && (
          <span className="muted small" role="status" data-testid="judge-saved">
            Saved; episodes judged from now on use these settings.
          </span>
        )}
      </div>
    </form>
  );
}

/** A manager's settings of the project's judge: whether it judges every finished episode, how, with how many votes. */
export function JudgeSettingsForm({ projectId }: { projectId: number }) {
  const settings = useQuery({ queryKey: judgeKeys.settings(projectId), queryFn: ({ signal }) => judgeSettingsGet(projectId, signal) });
  if (settings.isPending) return <Spinner label="Loading the judge's settings…" />;
  if (settings.isError) return <ErrorBanner error={settings.error} title="Could not load the judge's settings" onRetry={() => settings.refetch()} />;
  return <Editor projectId={projectId} saved={settings.data} />;
}
