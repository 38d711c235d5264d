import { useState } from "react";
import { Link } from "react-router";
import type { QueueItem, ReviewQueue } from "../api/queues";
import type { Verdict } from "../api/review";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { isOverLimit } from "../components/limits";
import { useServerErrors } from "../components/useServerErrors";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { useIdParam } from "../components/useIdParam";
import { useSession } from "../components/useSession";
import { ProjectFrame } from "../shell/ProjectFrame";
import { kappaWords } from "./CalibrationPanel";
import { useAdjudicate, useQueue, useReviewNext } from "./queueQueries";
import "./review.css";

const percent = (share: number | null) => (share === null ? "—" : `${Math.round(share * 100)} %`);

/** One disagreement: the reviews side by side, and the manager's final verdict. */
function Adjudication({ projectId, queueId, item }: { projectId: number; queueId: number; item: QueueItem }) {
  const adjudicate = useAdjudicate(queueId);
  const [comment, setComment] = useState(item.adjudication_comment);
  const server = useServerErrors(adjudicate.error);
  const tooLong = isOverLimit("adjudication_comment", comment);
  const decide = (verdict: Verdict) => adjudicate.mutate({ itemId: item.id, verdict, comment });
  return (
    <li className="card adjudication" data-testid="adjudication-item" data-item-id={item.id} data-state={item.state}>
      <h3>
        <Link to={`/projects/${projectId}/review/${item.episode}`}>Episode #{item.episode}</Link>{" "}
        <span className="muted small">
          {item.state === "adjudicated"
            ? `final verdict: ${item.final_verdict} (by ${item.adjudicated_by})`
            : "the reviews disagree: decide"}
        </span>
      </h3>
      <div className="adjudication-reviews">
        {(item.reviews ?? []).map((r) => (
          <div key={r.id} className="adjudication-review" data-testid="adjudication-review">
            <strong>{r.reviewer.username}</strong>: {r.verdict}
            {r.grade ? ` · grade ${r.grade}` : ""}
            {r.comment && <p className="small typed-text">{r.comment}</p>}
          </div>
        ))}
      </div>
      <Field label="Why (optional)" limit={{ kind: "adjudication_comment", value: comment }} problems={server.errors.comment}>
        {(control) => (
          <input
            {...control}
            value={comment}
            onChange={(e) => {
              setComment(e.target.value);
              server.clear("comment");
            }}
            data-testid="adjudication-comment"
          />
        )}
      </Field>
      <div className="button-row">
        <button type="button" className="button" onClick={() => decide("accept")} disabled={adjudicate.isPending || tooLong}
                data-testid="adjudicate-accept">
          Final verdict: accept
        </button>
        <button type="button" className="button" onClick={() => decide("reject")} disabled={adjudicate.isPending || tooLong}
                data-testid="adjudicate-reject">
          Final verdict: reject
        </button>
      </div>
      {adjudicate.isError && (
        <ErrorBanner error={adjudicate.error} fieldErrors={server.errors} besideFields={["comment"]} title="Could not record the verdict" />
      )}
    </li>
  );
}

function QueueView({ projectId, queue }: { projectId: number; queue: ReviewQueue }) {
  const { user } = useSession();
  const next = useReviewNext(projectId);
  const p = queue.progress;
  const agreementOf = (username: string) => queue.agreement?.reviewers.find((x) => x.username === username);
  const assigned = queue.assignees.some((a) => a.id === user?.id);
  return (
    <>
      <div className="page-header">
        <h1>Queue “{queue.name}”</h1>
        <span className="muted">
          {queue.overlap} reviewer{queue.overlap === 1 ? "" : "s"} per episode · {queue.state} · made by {queue.created_by}
        </span>
        <div className="header-spacer" />
        {assigned && queue.state === "open" && (
          <button type="button" className="button primary" onClick={() => next.go(queue.id)} data-testid="queue-review-next">
            Review next
          </button>
        )}
      </div>
      {next.mutation.isError && <ErrorBanner error={next.mutation.error} title="Could not get your next episode" />}
      {next.empty === queue.id && <p data-testid="queue-empty">Nothing left for you in this queue. Thank you!</p>}
      <section className="card" data-testid="queue-progress">
        <h2>Progress</h2>
        <p>
          <span data-testid="queue-reviews-done">{p.reviews_done}</span> of {p.reviews_needed} reviews done ·{" "}
          {p.done} episodes agreed · {p.adjudication} waiting for a final verdict · {p.adjudicated} decided by a
          manager · {p.pending} still need reviews
        </p>
        <Table
          bare
          rows={p.reviewers}
          rowKey={(r) => r.id}
          rowProps={(r) => ({ "data-testid": "queue-reviewer", "data-username": r.username })}
          columns={[
            { header: "Reviewer", cell: (r) => r.username },
            { header: "Reviewed", className: "num", cellProps: () => ({ className: "num mono" }), cell: (r) => r.reviewed },
            { header: "Skipped", className: "num", cellProps: () => ({ className: "num mono" }), cell: (r) => r.skipped },
            { header: "Holding now", className: "num", cellProps: () => ({ className: "num mono" }), cell: (r) => r.holding },
            {
              header: "Agrees with the outcome",
              hidden: !queue.agreement,
              className: "num",
              cellProps: () => ({ className: "num mono" }),
              cell: (r) => percent(agreementOf(r.username)?.agreement ?? null),
            },
            {
              header: "Kappa",
              hidden: !queue.agreement,
              className: "num",
              cellProps: () => ({ className: "num mono" }),
              cell: (r) => agreementOf(r.username)?.kappa ?? "—",
            },
          ]}
        />
      </section>
      {queue.agreement && (
        <section className="card" data-testid="queue-agreement">
          <h2>Agreement</h2>
          <p>
            Of {queue.agreement.items_with_multiple_reviews} episodes with two or more reviews, the reviewers agreed on{" "}
            <span data-testid="queue-agreement-share">{percent(queue.agreement.agreement)}</span>. Cohen's kappa{" "}
            {queue.agreement.kappa ?? "—"}: {kappaWords(queue.agreement.kappa)}.
          </p>
        </section>
      )}
      {queue.adjudication && (
        <section data-testid="queue-adjudication">
          <h2>Disagreements</h2>
          {queue.adjudication.length === 0 && <p className="muted">No disagreements so far.</p>}
          <ul className="adjudication-list" style={{ listStyle: "none", padding: 0 }}>
            {queue.adjudication.map((item) => (
              <Adjudication key={item.id} projectId={projectId} queueId={queue.id} item={item} />
            ))}
          </ul>
        </section>
      )}
    </>
  );
}

/** `/projects/:projectId/review/queues/:queueId`: a queue's progress, agreement and adjudication. */
export function QueuePage() {
  const projectId = useIdParam("projectId");
  const queueId = useIdParam("queueId");
  const queue = useQueue(queueId);
  return (
    <ProjectFrame
      projectId={projectId}
      trail={[{ label: "Review", to: `/projects/${projectId}/review` }, { label: queue.data?.name ?? `Queue ${queueId}` }]}
    >
      {() => (
        <>
          {queue.isPending && <Spinner label="Loading the queue…" />}
          {queue.isError && <ErrorBanner error={queue.error} title="Could not load the queue" onRetry={() => queue.refetch()} />}
          {queue.data && <QueueView projectId={projectId} queue={queue.data} />}
        </>
      )}
    </ProjectFrame>
  );
}
