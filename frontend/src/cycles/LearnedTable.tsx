import type { Cycle } from "../api/cycles";
import type { Schemas } from "../api/types";
import { Table } from "../components/Table";

type Share = Schemas["LearnedShareOutput"];
type Learned = Schemas["LearnedOutput"];

const KIND_WORDS: Record<string, string> = { edit: "edits", takeover: "takeovers", rejection: "answered rejections" };

/** "5 of 6 (83 %)", or "—" when there was none. */
export function shareText(share: Share): string {
  if (!share.corrections) return "—";
  return `${share.learned} of ${share.corrections} (${Math.round((share.share ?? 0) * 100)} %)`;
}

/**
 * Did the candidate learn what people corrected? Each corrected step it trained on, and each held out for
 * validation (the honest figure), asked again after the evaluation: learned when it now gives the person's action.
 */
export function LearnedTable({ cycle }: { cycle: Cycle }) {
  const learned = (cycle.decision_data as { learned?: Learned }).learned;
  if (!learned) return null;
  const none = !learned.trained.corrections && !learned.held_out.corrections;
  const rows = [
    ...learned.by_task.map((t) => ({ key: `task-${t.task}`, label: t.task, trained: t.trained, held_out: t.held_out })),
    ...learned.by_kind.map((k) => ({ key: `kind-${k.kind}`, label: KIND_WORDS[k.kind] ?? k.kind, trained: k.trained, held_out: k.held_out })),
  ];
  return (
    <section className="cycle-learned" aria-label="Corrections learned" data-testid="cycle-learned">
      <h3>Did {cycle.candidate?.name ?? "the candidate"} learn the corrections?</h3>
      {learned.error && <p className="field-error">The corrections could not all be replayed: {learned.error}</p>}
      {learned.not_replayed && <p className="muted small">Not replayed: {learned.not_replayed}.</p>}
      {none ? (
        <p className="muted small" data-testid="cycle-learned-none">
          None of its training rows was a person's correction (an edit, a takeover or an answered rejection).
        </p>
      ) : (
        <>
          <p className="small" data-testid="cycle-learned-total">
            Learned {shareText(learned.trained)} of the corrections it trained on; {shareText(learned.held_out)} of those
            held out, which it never saw.
          </p>
          <Table
            bare
            testId="cycle-learned-table"
            rows={rows}
            rowKey={(row) => row.key}
            columns={[
              { header: "Task / kind of correction", rowHeader: true, cell: (row) => row.label },
              { header: "Trained on: learned", cellProps: () => ({ className: "num mono" }), cell: (row) => shareText(row.trained) },
              { header: "Held out: learned", cellProps: () => ({ className: "num mono" }), cell: (row) => shareText(row.held_out) },
            ]}
          />
        </>
      )}
    </section>
  );
}
