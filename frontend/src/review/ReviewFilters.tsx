import { useEffect, useState, type ReactNode } from "react";
import { EPISODE_MODES, EPISODE_STATUSES } from "../api/episodes";
import { useMembers, useTasks } from "../components/projectQueries";
import { changedFilters, type FilterKey, type Filters, ORDERINGS } from "./filters";
import { REVIEW_STATUSES } from "../api/review";
import { useCheckpoints } from "./queries";

interface ReviewFiltersProps {
  projectId: number;
  filters: Filters;
  params: URLSearchParams;
  onChange: (key: FilterKey, value: string) => void;
  onClear: () => void;
}

function Field({ label, children }: { label: string; children: ReactNode }) {
  return (
    <label className="field">
      <span>{label}</span>
      {children}
    </label>
  );
}

function Choice({
  name,
  label,
  value,
  options,
  onChange,
}: {
  name: FilterKey;
  label: string;
  value: string;
  options: { value: string; label: string }[];
  onChange: (key: FilterKey, value: string) => void;
}) {
  return (
    <Field label={label}>
      <select
        value={value}
        data-testid={`review-filter-${name}`}
        data-set={value ? "true" : undefined}
        onChange={(e) => onChange(name, e.target.value)}
      >
        <option value="">any</option>
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
    </Field>
  );
}

/** A number typed in full before it filters: applied on Enter or when the field is left. */
function NumberFilter({
  name,
  label,
  value,
  onChange,
}: {
  name: FilterKey;
  label: string;
  value: string;
  onChange: (key: FilterKey, value: string) => void;
}) {
  const [text, setText] = useState(value);
  useEffect(() => setText(value), [value]);
  const commit = () => text.trim() !== value && onChange(name, text.trim());
  return (
    <Field label={label}>
      <input
        type="number"
        step="any"
        inputMode="decimal"
        value={text}
        placeholder="any"
        data-testid={`review-filter-${name}`}
        data-set={value ? "true" : undefined}
        onChange={(e) => setText(e.target.value)}
        onBlur={commit}
        onKeyDown={(e) => e.key === "Enter" && commit()}
      />
    </Field>
  );
}

const flag = [
  { value: "true", label: "with" },
  { value: "false", label: "without" },
];
const asOptions = (values: readonly string[]) => values.map((v) => ({ value: v, label: v }));

/** The review list's filters; each change goes into the URL at once (numbers when typed in full). */
export function ReviewFilters({ projectId, filters, params, onChange, onClear }: ReviewFiltersProps) {
  const tasks = useTasks(projectId);
  const members = useMembers(projectId);
  const checkpoints = useCheckpoints(projectId);
  const changed = changedFilters(params);
  return (
    <section className="card review-filters" aria-label="Filters" data-testid="review-filters">
      <div className="review-filter-grid">
        <Choice
          name="task"
          label="Task"
          value={filters.task}
          onChange={onChange}
          options={(tasks.data ?? []).map((t) => ({ value: String(t.id), label: `${t.task_name} (${t.split})` }))}
        />
        <Choice name="split" label="Split" value={filters.split} onChange={onChange} options={asOptions(["train", "eval"])} />
        <Choice
          name="checkpoint"
          label="Checkpoint"
          value={filters.checkpoint}
          onChange={onChange}
          options={checkpoints.map((c) => ({ value: String(c.id), label: c.name }))}
        />
        <Choice name="mode" label="Mode" value={filters.mode} onChange={onChange} options={asOptions(EPISODE_MODES)} />
        <Choice name="status" label="Status" value={filters.status} onChange={onChange} options={asOptions(EPISODE_STATUSES)} />
        <Choice
          name="outcome"
          label="Outcome"
          value={filters.outcome}
          onChange={onChange}
          options={asOptions(["success", "failure", "infeasible"])}
        />
        <NumberFilter name="reward_min" label="Reward from" value={filters.reward_min} onChange={onChange} />
        <NumberFilter name="reward_max" label="Reward to" value={filters.reward_max} onChange={onChange} />
        <Choice name="has_interventions" label="Interventions" value={filters.has_interventions} onChange={onChange} options={flag} />
        <Choice name="has_void" label="Void turns" value={filters.has_void} onChange={onChange} options={flag} />
        <Choice
          name="disagreement"
          label="Person vs. check"
          value={filters.disagreement}
          onChange={onChange}
          options={[
            { value: "true", label: "they disagree" },
            { value: "false", label: "they agree" },
          ]}
        />
        <Choice
          name="annotator"
          label="Annotator"
          value={filters.annotator}
          onChange={onChange}
          options={(members.data ?? []).map((m) => ({ value: String(m.user.id), label: m.user.username }))}
        />
        <Choice
          name="review_status"
          label="Review"
          value={filters.review_status}
          onChange={onChange}
          options={asOptions(REVIEW_STATUSES)}
        />
        <Field label="Created from">
          <input
            type="date"
            value={filters.created_after}
            data-testid="review-filter-created_after"
            data-set={filters.created_after ? "true" : undefined}
            onChange={(e) => onChange("created_after", e.target.value)}
          />
        </Field>
        <Field label="Created to">
          <input
            type="date"
            value={filters.created_before}
            data-testid="review-filter-created_before"
            data-set={filters.created_before ? "true" : undefined}
            onChange={(e) => onChange("created_before", e.target.value)}
          />
        </Field>
        <Field label="Sort">
          <select
            value={filters.ordering || "-id"}
            data-testid="review-filter-ordering"
            onChange={(e) => onChange("ordering", e.target.value === "-id" ? "" : e.target.value)}
          >
            {ORDERINGS.map((o) => (
              <option key={o.value} value={o.value}>
                {o.label}
              </option>
            ))}
          </select>
        </Field>
        <div className="review-filter-actions">
          <button type="button" className="button subtle" disabled={changed === 0} onClick={onClear} data-testid="review-clear">
            Reset to finished, unreviewed
          </button>
        </div>
      </div>
    </section>
  );
}
