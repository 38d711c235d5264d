import { useQuery } from "@tanstack/react-query";
import { Link } from "react-router";
import { askKeys, asksWaiting } from "../api/asking";
import { ErrorBanner } from "../components/ErrorBanner";
import { stepNumber } from "../components/format";

/** "12 s", "3 min", "1 h 5 min": how long an episode has waited for a person. */
export function waited(seconds: number): string {
  if (seconds < 60) return `${Math.max(0, Math.round(seconds))} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/**
 * The person queue: autonomous episodes that stopped before a step the model was unsure of, longest wait first.
 * Nothing shows while none waits (the project may not ask at all).
 */
export function AsksWaiting({ projectId }: { projectId: number }) {
  const asks = useQuery({
    queryKey: askKeys.waiting(projectId),
    queryFn: ({ signal }) => asksWaiting(projectId, signal),
    refetchInterval: 3_000,
  });
  if (asks.error) return <ErrorBanner error={asks.error} onRetry={asks.refetch} />;
  if (!asks.data?.length) return null;
  return (
    <section className="card asks" aria-label="Waiting for a person" data-testid="asks-waiting">
      <h2>The model asks for you</h2>
      <p className="muted small">
        These episodes run on their own but stopped at a step the model was unsure of. Open one, approve, edit or take
        over the step, and it carries on by itself. Longest wait first.
      </p>
      <ul className="queue">
        {asks.data.map((ask) => (
          <li key={ask.episode}>
            <Link className="card queue-card" to={`/episodes/${ask.episode}`} data-testid="ask-item" data-episode={ask.episode}>
              <span className="queue-card-head">
                <strong>#{ask.episode}</strong>
                <span>{ask.task}</span>
                <span className="header-spacer" />
                <span className="badge status-paused">waiting {waited(ask.waited_seconds)}</span>
              </span>
              <span className="small" data-testid="ask-reason">
                {ask.step != null ? `Step ${stepNumber(ask.step)}: ` : ""}unsure ({ask.reason})
              </span>
              <span className="muted small">
                seed {ask.seed}
                {ask.control ? ` · ${ask.control} is answering` : " · nobody is answering yet"}
              </span>
            </Link>
          </li>
        ))}
      </ul>
    </section>
  );
}
