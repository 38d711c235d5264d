import type { ConnectionState } from "../api/ws";

const LABELS: Record<ConnectionState, string> = {
  connecting: "Connecting…",
  open: "Live",
  reconnecting: "Reconnecting…",
  closed: "Disconnected",
};

/** The WebSocket's state, always visible, with a retry when it is down. */
export function ConnectionBadge({
  state,
  detail,
  onRetry,
}: {
  state: ConnectionState;
  detail: string;
  onRetry?: () => void;
}) {
  return (
    <span className="connection">
      <span
        className={`connection-state connection-${state}`}
        data-testid="connection-state"
        data-state={state}
        title={detail || LABELS[state]}
        role="status"
      >
        <span className="connection-dot" aria-hidden="true" />
        {LABELS[state]}
      </span>
      {detail && state !== "open" && <span className="muted small">{detail}</span>}
      {onRetry && (state === "reconnecting" || state === "closed") && (
        <button type="button" className="button subtle small" onClick={onRetry}>
          Retry now
        </button>
      )}
    </span>
  );
}
