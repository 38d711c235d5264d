import type { Notice } from "./episodeState";

/** Why a key just pressed did nothing: shown briefly, then it goes away by itself. */
export interface Hint {
  key: number;
  text: string;
}

/**
 * Errors from the server, each with its message, until the person dismisses them; and the
 * passing hint of a shortcut that could not act.
 */
export function Notices({
  notices,
  onDismiss,
  hint = null,
  onHintDismiss,
}: {
  notices: Notice[];
  onDismiss: (key: number) => void;
  hint?: Hint | null;
  onHintDismiss?: () => void;
}) {
  if (notices.length === 0 && !hint) return null;
  return (
    <div className="toasts">
      {hint && (
        <div key={`hint-${hint.key}`} className="toast toast-info" role="status" aria-live="polite">
          <div className="banner-body">
            <p data-testid="shortcut-hint">{hint.text}</p>
          </div>
          {onHintDismiss && (
            <button type="button" className="button subtle small" aria-label="Dismiss" onClick={onHintDismiss}>
              ✕
            </button>
          )}
        </div>
      )}
      <div aria-live="assertive">
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
    </div>
  );
}
