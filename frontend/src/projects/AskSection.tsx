import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { askCalibrationGet, askKeys, askSettingsGet, askSettingsSet, type AskCalibration } from "../api/asking";
import { BarChart } from "../components/BarChart";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import "./asking.css";

const percent = (share: number | null | undefined) => (share == null ? "—" : `${Math.round(share * 100)} %`);

/** The floor form: empty means never ask. */
function FloorForm({ projectId, current, suggested }: { projectId: number; current: number | null; suggested: number | null }) {
  const client = useQueryClient();
  const [text, setText] = useState(current === null ? "" : String(current));
  const save = useMutation({
    mutationFn: (floor: number | null) => askSettingsSet(projectId, { ask_below: floor }),
    onSuccess: (fresh) => {
      client.setQueryData(askKeys.settings(projectId), fresh);
      client.invalidateQueries({ queryKey: askKeys.calibration(projectId) });
      setText(fresh.ask_below === null ? "" : String(fresh.ask_below));
    },
  });
  const value = text.trim() === "" ? null : Number(text);
  const bad = value !== null && (!Number.isFinite(value) || value <= 0 || value >= 1);

  function submit(event: FormEvent) {
    event.preventDefault();
    if (!bad) save.mutate(value);
  }

  return (
    <form className="ask-form" onSubmit={submit} aria-label="Ask a person below">
      <label className="field">
        <span>Ask a person when the model's confidence is below (0 to 1; empty: never ask)</span>
        <input
          type="text"
          inputMode="decimal"
          value={text}
          onChange={(e) => setText(e.currentTarget.value)}
          data-testid="ask-below"
          aria-invalid={bad}
          placeholder="never"
        />
      </label>
      {bad && (
        <p className="field-error" data-testid="ask-below-error">
          Write a number between 0 and 1, such as 0.5, or leave it empty to never ask.
        </p>
      )}
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={bad || save.isPending} data-testid="ask-save">
          {save.isPending ? "Saving…" : "Save"}
        </button>
        {suggested !== null && suggested !== current && (
          <button type="button" className="button subtle" onClick={() => save.mutate(suggested)} data-testid="ask-use-suggested">
            Use the suggested floor ({suggested})
          </button>
        )}
      </div>
      {save.error && <ErrorBanner error={save.error} />}
      {!save.error && save.isSuccess && (
        <p className="muted small" role="status" data-testid="ask-saved">
          {save.data.ask_below === null
            ? "Saved: autonomous episodes never stop to ask."
            : `Saved: an autonomous episode stops and asks a person when its confidence is below ${save.data.ask_below}.`}
        </p>
      )}
    </form>
  );
}

function CalibrationCard({ data }: { data: AskCalibration }) {
  if (data.reviewed === 0) {
    return (
      <p className="empty-state" data-testid="ask-calibration-empty">
        No decided steps with a confidence yet. Once people have approved, edited or rejected some proposals (in supervised
        sessions, or when the model asked), this card shows how often each confidence was right.
      </p>
    );
  }
  return (
    <div className="ask-calibration" data-testid="ask-calibration">
      <p className="small">
        From the latest {data.reviewed} proposals people decided. A proposal is good when it ran as proposed (not edited, taken
        over or rejected).{" "}
        <strong data-testid="ask-suggested">
          {data.suggested === null
            ? `No floor lets through only proposals that were good ${percent(data.good_enough)} of the time yet.`
            : `Suggested floor: ${data.suggested} (above it, proposals were good ${percent(
                data.floors.find((f) => f.floor === data.suggested)?.good_above,
              )} of the time).`}
        </strong>
      </p>
      <div className="chart-row">
        <BarChart
          title="How often a proposal was good, by confidence"
          yLabel="good"
          yMin={0}
          yMax={1}
          formatY={(v) => percent(v)}
          bars={data.buckets.map((b) => ({
            label: b.low.toFixed(1),
            value: b.good,
            title: `${b.steps} proposals with confidence ${b.low.toFixed(1)}–${b.high.toFixed(1)}: ${percent(b.good)} good`,
          }))}
        />
        <BarChart
          title="Share of steps that would have asked, by floor"
          yLabel="asked"
          yMin={0}
          yMax={1}
          formatY={(v) => percent(v)}
          bars={data.floors.map((f) => ({
            label: String(f.floor),
            value: f.asked,
            title: `Below ${f.floor}: ${percent(f.asked)} of ${data.steps} recent steps would have asked a person`,
          }))}
        />
      </div>
    </div>
  );
}

/**
 * Settings: when an autonomous episode stops and asks a person (the model's confidence in a proposal below a floor),
 * and the calibration card that helps choose the floor. Managers.
 */
export function AskSection({ projectId }: { projectId: number }) {
  const settings = useQuery({ queryKey: askKeys.settings(projectId), queryFn: ({ signal }) => askSettingsGet(projectId, signal) });
  const calibration = useQuery({
    queryKey: askKeys.calibration(projectId),
    queryFn: ({ signal }) => askCalibrationGet(projectId, signal),
  });
  return (
    <section className="card" aria-label="Asking a person" data-testid="ask-section">
      <h2>Ask a person when the model is unsure</h2>
      <p className="muted small">
        The model's confidence in a proposal is how probable it found its own action. Below the floor, an autonomous episode
        stops before acting and waits on the Live sessions page until a person decides that step; then it runs on alone.
      </p>
      {settings.isPending && <Spinner label="Loading…" />}
      {settings.error && <ErrorBanner error={settings.error} onRetry={settings.refetch} />}
      {settings.data && (
        <FloorForm
          projectId={projectId}
          current={settings.data.ask_below}
          suggested={calibration.data?.suggested ?? null}
        />
      )}
      <h3>Calibration</h3>
      {calibration.isPending && <Spinner label="Reading decided steps…" />}
      {calibration.error && <ErrorBanner error={calibration.error} onRetry={calibration.refetch} />}
      {calibration.data && <CalibrationCard data={calibration.data} />}
    </section>
  );
}
