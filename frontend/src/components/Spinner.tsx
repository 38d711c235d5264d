/** A small progress indicator with a text label (screen readers hear the label). */
export function Spinner({ label = "Loading…", block = false }: { label?: string; block?: boolean }) {
  return (
    <div className={block ? "spinner-block" : "spinner-inline"} role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      <span>{label}</span>
    </div>
  );
}
