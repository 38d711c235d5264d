import { useEffect, useState } from "react";
import { ApiError } from "../api/client";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import type { Bucket, Routing, Rule } from "../api/datasets";
import { SNAPSHOT_KINDS, useRouting, useSetRouting } from "./queries";

const RULES: { rule: Rule; label: string; help: string }[] = [
  { rule: "reward", label: "Env reward", help: "V=1 when the environment's reward reaches the threshold" },
  { rule: "review", label: "Review", help: "V=1 when reviewers accept the episode (unreviewed ones wait)" },
  { rule: "both", label: "Both", help: "V=1 only when the reward reaches the threshold and reviewers accept it" },
  { rule: "judge", label: "Judge", help: "V=1 when the judge says success, V=0 when it says failure (unjudged ones wait)" },
  {
    rule: "reward_or_judge",
    label: "Reward or judge",
    help: "V=1 when the reward reaches the threshold or the judge says success; V=0 when neither (tasks without a checker wait for the judge)",
  },
  {
    rule: "judge_and_review",
    label: "Judge and review",
    help: "V=1 only when the judge says success and reviewers accept it; V=0 when either says no",
  },
];

/** The validator V that routes finished episodes to SFT (V=1) or CT (V=0); managers change it here. */
function ValidatorForm({ projectId, routing }: { projectId: number; routing: Routing }) {
  const save = useSetRouting(projectId);
  const [rule, setRule] = useState<Rule>(routing.rule);
  const [threshold, setThreshold] = useState(String(routing.reward_threshold));
  useEffect(() => {
    setRule(routing.rule);
    setThreshold(String(routing.reward_threshold));
  }, [routing.rule, routing.reward_threshold]);
  const number = Number(threshold);
  // A share of the full reward, as the server checks it.
  const valid = threshold.trim() !== "" && Number.isFinite(number) && number >= 0 && number <= 1;
  const dirty = rule !== routing.rule || (valid && number !== routing.reward_threshold);
  const fieldErrors = save.error instanceof ApiError ? save.error.fieldErrors : {};
  const refused = fieldErrors.reward_threshold ?? [];
  const otherErrors = Object.fromEntries(Object.entries(fieldErrors).filter(([field]) => field !== "reward_threshold"));

  return (
    <form
      className="routing-form"
      data-testid="routing-form"
      noValidate
      onSubmit={(e) => {
        e.preventDefault();
        if (valid) save.mutate({ rule, reward_threshold: number });
      }}
    >
      <fieldset className="routing-rules">
        <legend>Validator V</legend>
        {RULES.map((r) => (
          <label key={r.rule} className={rule === r.rule ? "routing-rule chosen" : "routing-rule"}>
            <input
              type="radio"
              name="rule"
              value={r.rule}
              checked={rule === r.rule}
              data-testid={`routing-rule-${r.rule}`}
              onChange={() => setRule(r.rule)}
            />
            <span>
              <strong>{r.label}</strong>
              <span className="muted small">{r.help}</span>
            </span>
          </label>
        ))}
      </fieldset>
      <div className="inline-form">
        <label className="field">
          <span>Reward threshold (share of the full reward, 0 to 1)</span>
          <input
            type="number"
            min={0}
            max={1}
            step={0.05}
            value={threshold}
            aria-invalid={!valid || refused.length > 0}
            aria-describedby="routing-threshold-error"
            disabled={rule === "review"}
            data-testid="routing-threshold"
            onChange={(e) => {
              setThreshold(e.target.value);
              if (save.isError) save.reset();
            }}
          />
          {!valid && (
            <span className="field-error" id="routing-threshold-error" data-testid="routing-threshold-error">
              The threshold is a share of the full reward: a number from 0 to 1, e.g. 1 or 0.5.
            </span>
          )}
          {valid && refused.length > 0 && (
            <span className="field-error" id="routing-threshold-error" data-testid="routing-threshold-error">
              Refused: {refused.join(" ")}
            </span>
          )}
        </label>
        <button type="submit" className="button primary" disabled={!dirty || !valid || save.isPending} data-testid="routing-save">
          {save.isPending ? "Saving…" : "Save routing"}
        </button>
        {save.isSuccess && !dirty && <span className="muted small" data-testid="routing-saved">Saved; the buckets below use it.</span>}
      </div>
      {save.isError && (
        <ErrorBanner
          error={save.error}
          title="The routing was not changed"
          // the threshold's refusal shows beside the field, in the server's words
          message={refused.length ? "The reward threshold was refused; the reason is beside the field." : undefined}
          fieldErrors={otherErrors}
        />
      )}
    </form>
  );
}

function BucketCard({ kind, label, bucket, help, sub }: { kind: string; label: string; bucket: Bucket; help: string; sub?: boolean }) {
  return (
    <li className={sub ? "dataset-bucket dataset-bucket-sub" : "dataset-bucket"} data-testid={`bucket-${kind}`} title={help}>
      <div className="dataset-bucket-kind">{label}</div>
      <div className="dataset-bucket-rows">
        {bucket.rows.toLocaleString()} <span className="muted small">rows</span>
      </div>
      <div className="muted small">
        {bucket.episodes.toLocaleString()} episode{bucket.episodes === 1 ? "" : "s"}
      </div>
      <div className={bucket.new_rows ? "dataset-bucket-new" : "muted small"}>
        {bucket.new_rows ? `+${bucket.new_rows.toLocaleString()} new` : "nothing new"}
      </div>
    </li>
  );
}

/** Routing settings and what each bucket holds now. */
export function RoutingCard({ projectId }: { projectId: number }) {
  const routing = useRouting(projectId);
  if (routing.isPending) return <Spinner label="Loading routing…" />;
  if (routing.isError) return <ErrorBanner error={routing.error} title="Could not load routing" onRetry={() => routing.refetch()} />;
  const { buckets } = routing.data;
  return (
    <section className="card routing-card" aria-label="Routing">
      <ValidatorForm projectId={projectId} routing={routing.data} />
      <h3>
        Buckets now <span className="dataset-buckets-note">· new: rows no ready snapshot of that kind holds yet</span>
      </h3>
      <ul className="dataset-buckets">
        {SNAPSHOT_KINDS.flatMap(({ kind, label, help }) => {
          if (!buckets[kind]) return []; // a server that does not make this kind yet
          const cards = [<BucketCard key={kind} kind={kind} label={label} bucket={buckets[kind]} help={help} />];
          if (kind === "sft" && buckets.rft) {
            cards.push(
              <BucketCard
                key="rft"
                kind="rft"
                label="RFT (in SFT)"
                bucket={buckets.rft}
                help="The SFT rows of autonomous successes: rejection-sampled fine-tuning data, frozen with SFT"
                sub
              />,
            );
          }
          return cards;
        })}
      </ul>
    </section>
  );
}
