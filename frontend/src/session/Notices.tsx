import type { Notice } from "./episodeState";

/** Errors from the server, each with its message, until the person dismisses them. */
export function Notices({ notices, onDismiss }: { notices: Notice[]; onDismiss: (key: number) => void }) {
  if (notices.length === 0) return null;
  return (
    <div className="toasts" aria-live="assertive">
      {notices.map((n) => (
        <div key={n.key} className="toast" role="alert" data-testid="toast">
          <div className="banner-body">
            <strong>{n.title}</strong>
            <p>{n.message}</p>
          </div>
          <button type="button" className="button subtle small" aria-label="Dismiss" onClick={() => onDismiss(n.key)}>
            ✕
          </button>
        </div>
      ))}
    </div>
  );
}
