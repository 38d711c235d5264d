import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { type FormEvent, useState } from "react";
import { type Redaction, redactionGet, redactionKeys, redactionMark, type RedactionMarkInput, redactionSet } from "../api/redaction";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";

const WHERE: Record<string, string> = {
  element: "on screen",
  url: "in URLs",
  screen_text: "in terminal text",
  thought: "in thoughts",
  action: "in typed actions",
  spoken: "in spoken words",
};

/** Patterns as a person writes them: one a line, "name: regular expression". */
function patternsText(patterns: string[][]): string {
  return patterns.map(([name, regex]) => `${name}: ${regex}`).join("\n");
}

function patternsOf(text: string): string[][] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const at = line.indexOf(":");
      return at < 0 ? [line, ""] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
    });
}

function PolicyForm({ projectId, data, admin }: { projectId: number; data: Redaction; admin: boolean }) {
  const client = useQueryClient();
  const [enabled, setEnabled] = useState(data.policy.enabled);
  const [keepOriginals, setKeepOriginals] = useState(data.policy.keep_originals);
  const [words, setWords] = useState(data.policy.words.join("\n"));
  const [patterns, setPatterns] = useState(patternsText(data.policy.patterns));
  const [reason, setReason] = useState("");
  const save = useMutation({
    mutationFn: () =>
      redactionSet(
        projectId,
        {
          ...data.policy,
          enabled,
          keep_originals: keepOriginals,
          words: words.split("\n").map((w) => w.trim()).filter(Boolean),
          patterns: patternsOf(patterns),
        },
        reason,
      ),
    onSuccess: (fresh) => {
      client.setQueryData(redactionKeys.project(projectId), fresh);
      setReason("");
    },
  });
  const switchingOff = data.policy.enabled && !enabled;
  const keeping = enabled && keepOriginals && !data.policy.keep_originals;
  const needsAdmin = switchingOff || keeping;

  function submit(event: FormEvent) {
    event.preventDefault();
    save.mutate();
  }

  return (
    <form className="privacy-form" onSubmit={submit} aria-label="Redaction policy">
      <label className="field">
        <span>
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} data-testid="redaction-enabled" />{" "}
          Redact personal data (the kinds above) where it is stored: screens, typed text, thoughts, transcripts, comments
        </span>
      </label>
      <label className="field">
        <span>
          <input
            type="checkbox"
            checked={keepOriginals}
            disabled={!enabled}
            onChange={(e) => setKeepOriginals(e.currentTarget.checked)}
            data-testid="redaction-keep-originals"
          />{" "}
          Keep what is hidden apart, for this project's admins (each read is audited; replays of typed personal data need it)
        </span>
      </label>
      <label className="field">
        <span>Names and other private words, one a line (matched whole, in any case)</span>
        <textarea rows={4} value={words} onChange={(e) => setWords(e.target.value)} data-testid="redaction-words" />
      </label>
      <label className="field">
        <span>The project's own patterns, one a line: name: regular expression (e.g. customer_id: CUST-\d{"{5}"})</span>
        <textarea rows={3} value={patterns} onChange={(e) => setPatterns(e.target.value)} data-testid="redaction-patterns" />
      </label>
      {needsAdmin && (
        <label className="field">
          <span>{switchingOff ? "Why switch it off?" : "Why keep originals?"} (kept in the audit log; only an admin may)</span>
          <input value={reason} onChange={(e) => setReason(e.target.value)} data-testid="redaction-reason" />
        </label>
      )}
      <button type="submit" className="button primary" disabled={save.isPending || (needsAdmin && !admin)} data-testid="redaction-save">
        {save.isPending ? "Saving…" : "Save policy"}
      </button>
      {needsAdmin && !admin && (
        <p className="muted small">
          Only an admin of this project can {switchingOff ? "switch redaction off" : "keep originals"}.
        </p>
      )}
      {save.error && <ErrorBanner error={save.error} title="The policy was not saved" />}
      {save.isSuccess && (
        <p className="muted small" data-testid="redaction-saved">
          Saved. Snapshots frozen from now on record this policy; one frozen before and not yet built must be frozen again.
        </p>
      )}
    </form>
  );
}

function percent(value: number | null): string {
  return value === null ? "—" : `${Math.round(value * 100)} %`;
}

/** Mark personal data the policy left as it was. */
function MissForm({ kinds, onMark, busy }: { kinds: string[]; onMark: (mark: RedactionMarkInput) => void; busy: boolean }) {
  const [kind, setKind] = useState(kinds[0] ?? "name");
  const [text, setText] = useState("");
  return (
    <form
      className="inline-form"
      aria-label="Mark a miss"
      onSubmit={(event) => {
        event.preventDefault();
        onMark({ kind, verdict: "missed", text: text.trim() });
        setText("");
      }}
    >
      <label className="field">
        <span>Missed: personal data left as it was</span>
        <input value={text} onChange={(e) => setText(e.target.value)} data-testid="redaction-missed-text" maxLength={300} />
      </label>
      <label className="field">
        <span>Kind</span>
        <select value={kind} onChange={(e) => setKind(e.target.value)} data-testid="redaction-missed-kind">
          {kinds.map((k) => (
            <option key={k} value={k}>
              {k}
            </option>
          ))}
        </select>
      </label>
      <button type="submit" className="button" disabled={busy || !text.trim()} data-testid="redaction-missed-save">
        Mark as missed
      </button>
    </form>
  );
}

/**
 * The project's redaction policy (managers): what it finds in recent episodes, by kind and where, with examples to
 * check for wrong hits, and the words and patterns it adds to the built-in kinds.
 */
export function PrivacySection({ projectId, admin }: { projectId: number; admin: boolean }) {
  const client = useQueryClient();
  const query = useQuery({ queryKey: redactionKeys.project(projectId), queryFn: ({ signal }) => redactionGet(projectId, signal) });
  const mark = useMutation({
    mutationFn: (input: RedactionMarkInput) => redactionMark(projectId, input),
    onSuccess: (fresh) => client.setQueryData(redactionKeys.project(projectId), fresh),
  });
  if (query.isPending) return <Spinner label="Loading the redaction policy…" />;
  if (query.isError) return <ErrorBanner error={query.error} title="Could not load the redaction policy" onRetry={() => query.refetch()} />;
  const data = query.data;
  return (
    <section className="card privacy-section" aria-label="Personal data" data-testid="privacy-section">
      <div className="section-header">
        <h2>Personal data</h2>
        <span className={data.policy.enabled ? "badge" : "badge danger"} data-testid="redaction-state">
          {data.policy.enabled ? "redacted" : "not redacted"}
        </span>
      </div>
      <p className="muted small">
        Kinds: {data.policy.kinds.join(", ")}. Found in the {data.episodes} most recent episodes
        {data.counts.length === 0 ? ": nothing." : ":"}
      </p>
      {data.counts.length > 0 && (
        <Table
          testId="redaction-counts"
          bare
          rows={data.counts}
          rowKey={(row) => row.kind}
          rowProps={(row) => ({ "data-testid": "redaction-count", "data-kind": row.kind })}
          columns={[
            { header: "Kind", cell: (row) => row.kind },
            { header: "Hits", className: "num", cell: (row) => <span data-testid="redaction-hits">{row.hits}</span> },
            {
              header: "Precision",
              className: "num",
              cell: (row) => <span data-testid="redaction-precision">{percent(row.precision)}</span>,
            },
            {
              header: "Recall",
              className: "num",
              cell: (row) => <span data-testid="redaction-recall">{percent(row.recall)}</span>,
            },
            {
              header: "Where",
              cell: (row) =>
                Object.entries(row.where)
                  .map(([where, n]) => `${n} ${WHERE[where] ?? where}`)
                  .join(", "),
            },
            {
              header: "Examples (check for wrong hits)",
              cell: (row) =>
                row.examples.map((example, i) => (
                  <div key={i} className="small" data-testid="redaction-example">
                    …{example.before}
                    <mark>{example.match}</mark>
                    {example.after}… <span className="muted">(episode {example.episode}, step {example.step + 1})</span>{" "}
                    <button
                      type="button"
                      className="button subtle small"
                      data-testid="redaction-wrong-hit"
                      disabled={mark.isPending}
                      title="This is not personal data: count it as a wrong hit"
                      onClick={() =>
                        mark.mutate({
                          kind: row.kind,
                          verdict: "wrong_hit",
                          // a value hidden when stored is named by its label in its context
                          text: example.hidden ? `${example.before}${example.match}${example.after}`.trim() : example.match,
                          episode: example.episode,
                          step: example.step,
                        })
                      }
                    >
                      Wrong hit
                    </button>
                  </div>
                )),
            },
          ]}
        />
      )}
      <MissForm kinds={data.kinds} onMark={(input) => mark.mutate(input)} busy={mark.isPending} />
      {mark.error && <ErrorBanner error={mark.error} title="The mark was not saved" />}
      <PolicyForm key={projectId} projectId={projectId} data={data} admin={admin} />
    </section>
  );
}
