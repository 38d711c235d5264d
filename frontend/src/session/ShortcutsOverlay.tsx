import { shortcutHints } from "../components/shortcuts";

/** The `?` overlay: every shortcut of the live session page, from the shortcut table. */
export function ShortcutsOverlay({ onClose }: { onClose: () => void }) {
  return (
    <div className="overlay" role="presentation" onClick={onClose}>
      <div
        className="card overlay-card"
        role="dialog"
        aria-modal="true"
        aria-label="Keyboard shortcuts"
        data-testid="shortcuts-overlay"
        onClick={(e) => e.stopPropagation()}
      >
        <div className="section-header">
          <h2>Keyboard shortcuts</h2>
          <div className="header-spacer" />
          <button type="button" className="button subtle small" onClick={onClose}>
            Close
          </button>
        </div>
        <table className="shortcuts">
          <tbody>
            {shortcutHints("session").map(({ label, hint }) => (
              <tr key={label}>
                <td>
                  <kbd>{label}</kbd>
                </td>
                <td>{hint}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <p className="muted small">Shortcuts do nothing while you type in a field.</p>
      </div>
    </div>
  );
}
