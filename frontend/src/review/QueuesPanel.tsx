import { useState } from "react";
import { Link, useSearchParams } from "react-router";
import { useQuery } from "@tanstack/react-query";
import { memberList, projectKeys } from "../api/projects";
import type { ReviewQueue } from "../api/queues";
import { ErrorBanner } from "../components/ErrorBanner";
import { Field } from "../components/Field";
import { isOverLimit } from "../components/limits";
import { useServerErrors } from "../components/useServerErrors";
import { Spinner } from "../components/Spinner";
import { useSession } from "../components/useSession";
import { apiParams } from "./filters";
import { useCreateQueue, useQueues, useReviewNext } from "./queueQueries";

/** The review list's filters as a queue stores them: no project, cursor or ordering. */
export function queueFilter(projectId: number, params: URLSearchParams): Record<string, string> {
  const { project: _p, cursor: _c, ordering: _o, ...filter } = apiParams(projectId, params, false);
  return filter;
}

function progressText(queue: ReviewQueue): string {
  const p = queue.progress;
  const waiting = p.adjudication ? ` · ${p.adjudication} waiting for a final verdict` : "";
  return `${p.reviews_done} of ${p.reviews_needed} reviews · ${p.done + p.adjudicated} of ${p.items} episodes settled${waiting}`;
}

function NewQueueForm({ projectId, onDone }: { projectId: number; onDone: () => void }) {
  const [params] = useSearchParams();
  const members = useQuery({ queryKey: projectKeys.members(projectId), queryFn: ({ signal }) => memberList(projectId, signal) });
  const create = useCreateQueue(projectId);
  const [name, setName] = useState("");
  const [overlap, setOverlap] = useState(2);
  const [assignees, setAssignees] = useState<number[]>([]);
  const server = useServerErrors(create.error);
  const nameTooLong = isOverLimit("queue_name", name);
  const filter = queueFilter(projectId, params);
  const described = Object.entries(filter).map(([k, v]) => `${k.replace("_", " ")} ${v}`).join(", ") || "every episode";

  function toggle(id: number) {
    setAssignees((now) => (now.includes(id) ? now.filter((x) => x !== id) : [...now, id]));
    server.clear("assignees", "overlap");
  }

  return (
    <form
      className="queue-form"
      data-testid="queue-form"
      onSubmit={(e) => {
        e.preventDefault();
        if (nameTooLong) return;
        create.mutate({ name, filter, overlap, assignees }, { onSuccess: onDone });
      }}
    >
      <p className="muted small">
        The queue takes the finished episodes the list's filters match now ({described}).
      </p>
      <Field label="Name" limit={{ kind: "queue_name", value: name }} problems={server.errors.name}>
        {(control) => (
          <input
            {...control}
            className="typed-text"
            value={name}
            onChange={(e) => {
              setName(e.target.value);
              server.clear("name");
            }}
            data-testid="queue-name"
            required
            autoFocus
          />
        )}
      </Field>
      <Field label="Reviewers per episode" problems={server.errors.overlap}>
        {(control) => (
          <select
            {...control}
            value={overlap}
            onChange={(e) => {
              setOverlap(Number(e.target.value));
              server.clear("overlap");
            }}
            data-testid="queue-overlap"
          >
            {[1, 2, 3, 4, 5].map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        )}
      </Field>
      <fieldset>
        <legend>Who reviews</legend>
        {members.isPending && <Spinner label="Loading members…" />}
        {members.isError && <ErrorBanner error={members.error} title="Could not load the members" />}
        {members.data?.map((m) => (
          <label key={m.id} className="queue-assignee">
            <input
              type="checkbox"
              checked={assignees.includes(m.user.id)}
              onChange={() => toggle(m.user.id)}
              data-testid={`queue-assignee-${m.user.username}`}
            />{" "}
            {m.user.username} <span className="muted small">{m.role}</span>
          </label>
        ))}
        {server.errors.assignees && <span className="field-error">{server.errors.assignees.join(" ")}</span>}
      </fieldset>
      {create.isError && (
        <ErrorBanner
          error={create.error}
          fieldErrors={server.errors}
          besideFields={["name", "overlap", "assignees"]}
          title="Could not create the queue"
        />
      )}
      <div className="button-row">
        <button type="submit" className="button primary" disabled={create.isPending || nameTooLong} data-testid="queue-create">
          Create queue
        </button>
        <button type="button" className="button subtle" onClick={onDone}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/**
 * Review queues on the review page. Managers create one from the list's current filters and follow its
 * progress; anyone a queue assigns gets "Review next", which opens their next held episode.
 */
export function QueuesPanel({ projectId, manager }: { projectId: number; manager: boolean }) {
  const { user } = useSession();
  const queues = useQueues(projectId);
  const next = useReviewNext(projectId);
  const [creating, setCreating] = useState(false);
  const rows = queues.data ?? [];
  if (!manager && rows.length === 0) return null;
  return (
    <section className="card review-queues" aria-label="Review queues" data-testid="review-queues">
      <div className="card-head">
        <h2>Review queues</h2>
        <div className="header-spacer" />
        {manager && !creating && (
          <button type="button" className="button small" onClick={() => setCreating(true)} data-testid="queue-new">
            New queue from these filters
          </button>
        )}
      </div>
      {creating && <NewQueueForm projectId={projectId} onDone={() => setCreating(false)} />}
      {queues.isPending && <Spinner label="Loading queues…" />}
      {queues.isError && <ErrorBanner error={queues.error} title="Could not load the review queues" onRetry={() => queues.refetch()} />}
      {!queues.isPending && rows.length === 0 && <p className="muted small">No queues yet.</p>}
      <ul className="queue-list" style={{ listStyle: "none", padding: 0 }}>
        {rows.map((queue) => (
          <li key={queue.id} data-testid="queue-row" data-queue-id={queue.id}>
            <Link to={`/projects/${projectId}/review/queues/${queue.id}`} data-testid="queue-link">
              {queue.name}
            </Link>{" "}
            <span className="muted small">
              {queue.overlap} per episode · {queue.state} · {progressText(queue)}
            </span>{" "}
            {queue.state === "open" && queue.assignees.some((a) => a.id === user?.id) && (
              <button
                type="button"
                className="button primary small"
                onClick={() => next.go(queue.id)}
                disabled={next.mutation.isPending}
                data-testid="queue-review-next"
              >
                Review next
              </button>
            )}
            {next.empty === queue.id && (
              <span className="muted small" data-testid="queue-empty">
                {" "}Nothing left for you in this queue.
              </span>
            )}
            {next.mutation.isError && next.mutation.variables === queue.id && (
              <ErrorBanner error={next.mutation.error} title="Could not get your next episode" />
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}
