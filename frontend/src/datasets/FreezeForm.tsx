import { useRef, useState } from "react";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { isOverLimit } from "../components/limits";
import { useServerErrors } from "../components/useServerErrors";
import { useTasks } from "../components/projectQueries";
import { useCheckpoints } from "../review/queries";
import type { Snapshot, SnapshotFilter, SnapshotKind } from "../api/datasets";
import { SNAPSHOT_KINDS, useCreateSnapshot, useRouting } from "./queries";

/** The filter a form state asks for: only what was set. */
export function filterOf(form: {
  onlyNew: boolean;
  tasks: number[];
  split: string;
  mode: string;
  checkpoint: string;
  createdAfter: string;
  createdBefore: string;
}): SnapshotFilter {
  const filter: SnapshotFilter = {};
  if (form.onlyNew) filter.only_new = true;
  if (form.tasks.length) filter.tasks = form.tasks;
  if (form.split) filter.split = form.split as SnapshotFilter["split"];
  if (form.mode) filter.mode = form.mode as SnapshotFilter["mode"];
  if (form.checkpoint) filter.checkpoint = Number(form.checkpoint);
  if (form.createdAfter) filter.created_after = form.createdAfter;
  if (form.createdBefore) filter.created_before = form.createdBefore;
  return filter;
}

/**
 * What a freeze did, said plainly: a new snapshot queued, or (the same data frozen again: a double
 * click, nothing new since) the snapshot that already holds it, with no copy made.
 */
export function freezeResult(snapshot: Snapshot): string {
  const which = `snapshot #${snapshot.id} (“${snapshot.name}”)`;
  if (!snapshot.duplicate) return `Asked for ${which}: the list below shows a worker writing it, then when it is ready.`;
  if (snapshot.status === "building") return `Already being frozen as ${which}: the same data, so no second copy was made.`;
  return `Already frozen as ${which}: nothing new since, so no second copy was made.`;
}

/** Freeze the rows of one kind, optionally filtered; a worker builds it and the list below shows its progress. */
export function FreezeForm({ projectId }: { projectId: number }) {
  const create = useCreateSnapshot(projectId);
  const routing = useRouting(projectId);
  const tasks = useTasks(projectId);
  const checkpoints = useCheckpoints(projectId);
  const [kind, setKind] = useState<SnapshotKind>("sft");
  const [name, setName] = useState("");
  const [onlyNew, setOnlyNew] = useState(false);
  const [chosenTasks, setChosenTasks] = useState<number[]>([]);
  const [split, setSplit] = useState("");
  const [mode, setMode] = useState("");
  const [checkpoint, setCheckpoint] = useState("");
  const [createdAfter, setCreatedAfter] = useState("");
  const [createdBefore, setCreatedBefore] = useState("");
  const bucket = routing.data?.buckets[kind];
  // One request at a time, even for a double click that lands before the button is re-rendered disabled.
  const inFlight = useRef(false);
  const server = useServerErrors(create.error);
  const nameTooLong = isOverLimit("snapshot_name", name);

  function toggleTask(id: number) {
    setChosenTasks((old) => (old.includes(id) ? old.filter((t) => t !== id) : [...old, id]));
  }

  return (
    <form
      className="card freeze-form"
      aria-label="Freeze a snapshot"
      onSubmit={(e) => {
        e.preventDefault();
        if (inFlight.current || nameTooLong) return;
        inFlight.current = true;
        const filter = filterOf({ onlyNew, tasks: chosenTasks, split, mode, checkpoint, createdAfter, createdBefore });
        create.mutate(
          { kind, name: name.trim(), filter },
          {
            onSuccess: (snapshot) => {
              if (!snapshot.duplicate) setName("");
            },
            onSettled: () => {
              inFlight.current = false;
            },
          },
        );
      }}
    >
      <div className="freeze-grid">
        <label className="field">
          <span>Kind</span>
          <select
            value={kind}
            data-testid="snapshot-kind"
            onChange={(e) => {
              setKind(e.target.value as SnapshotKind);
              create.reset();
            }}
          >
            {SNAPSHOT_KINDS.map((k) => (
              <option key={k.kind} value={k.kind}>
                {k.label}
                {routing.data?.buckets[k.kind] ? ` — ${routing.data.buckets[k.kind].rows} rows` : ""}
              </option>
            ))}
          </select>
        </label>
        <Field label="Name (optional)" limit={{ kind: "snapshot_name", value: name }} problems={server.errors.name}>
          {(control) => (
            // no maxLength: it would cut a pasted name without a word; the counter says when it is too long
            <input
              {...control}
              value={name}
              placeholder={`${kind} ${new Date().toISOString().slice(0, 10)}`}
              data-testid="snapshot-name"
              onChange={(e) => {
                setName(e.target.value);
                server.clear("name");
              }}
            />
          )}
        </Field>
        <label className="field freeze-check-field">
          <span>Which rows</span>
          <span className="freeze-check">
            <input type="checkbox" checked={onlyNew} data-testid="snapshot-only-new" onChange={(e) => setOnlyNew(e.target.checked)} />
            only new since the last {kind} snapshot
            {bucket ? <span className="muted"> ({bucket.new_rows})</span> : null}
          </span>
        </label>
      </div>
      <p className="muted small freeze-help">{SNAPSHOT_KINDS.find((k) => k.kind === kind)?.help}.</p>
      <details className="freeze-more">
        <summary>Narrow by task, split, mode, checkpoint or date</summary>
        <div className="freeze-grid">
          <fieldset className="field freeze-tasks">
            <legend>Tasks (none ticked: all)</legend>
            {(tasks.data ?? []).map((t) => (
              <label key={t.id} className="freeze-check">
                <input
                  type="checkbox"
                  checked={chosenTasks.includes(t.id)}
                  data-testid={`snapshot-task-${t.id}`}
                  onChange={() => toggleTask(t.id)}
                />
                {t.task_name} <span className="muted small">({t.split})</span>
              </label>
            ))}
          </fieldset>
          <label className="field">
            <span>Split</span>
            <select value={split} data-testid="snapshot-split" onChange={(e) => setSplit(e.target.value)}>
              <option value="">any</option>
              <option value="train">train</option>
              <option value="eval">eval</option>
            </select>
          </label>
          <label className="field">
            <span>Mode</span>
            <select value={mode} data-testid="snapshot-mode" onChange={(e) => setMode(e.target.value)}>
              <option value="">any</option>
              <option value="autonomous">autonomous</option>
              <option value="supervised">supervised</option>
            </select>
          </label>
          <label className="field">
            <span>Checkpoint</span>
            <select value={checkpoint} data-testid="snapshot-checkpoint" onChange={(e) => setCheckpoint(e.target.value)}>
              <option value="">any</option>
              {checkpoints.map((c) => (
                <option key={c.id} value={String(c.id)}>
                  {c.name}
                </option>
              ))}
            </select>
          </label>
          <label className="field">
            <span>Created from</span>
            <input type="date" value={createdAfter} data-testid="snapshot-created-after" onChange={(e) => setCreatedAfter(e.target.value)} />
          </label>
          <label className="field">
            <span>Created to</span>
            <input type="date" value={createdBefore} data-testid="snapshot-created-before" onChange={(e) => setCreatedBefore(e.target.value)} />
          </label>
        </div>
      </details>
      {create.isError && (
        <ErrorBanner error={create.error} fieldErrors={server.errors} besideFields={["name"]} title="Nothing was frozen" />
      )}
      {create.isSuccess && (
        <p
          className={create.data.duplicate ? "banner banner-info" : "muted small"}
          role="status"
          data-testid="snapshot-freeze-result"
          data-duplicate={create.data.duplicate ? "true" : "false"}
          data-snapshot-id={create.data.id}
        >
          {freezeResult(create.data)}
        </p>
      )}
      <div className="form-actions">
        <button type="submit" className="button primary" disabled={create.isPending || nameTooLong} data-testid="snapshot-create">
          {create.isPending ? "Queuing…" : `Freeze ${kind.toUpperCase()} snapshot`}
        </button>
        <span className="muted small">A worker writes the rows once (JSONL + Parquet) with their sha256; a snapshot never changes.</span>
      </div>
    </form>
  );
}
