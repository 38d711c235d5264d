import type { Step } from "../api/episodes";

/**
 * What a hybrid desktop step's shell command printed (the screenshot shows the desktop, not the shell):
 * its output, exit code, or why it did not run. Nothing for other steps.
 */
export function ShellOutput({ step }: { step: Pick<Step, "action" | "info"> }) {
  if (step.action?.name !== "shell") return null;
  const info = step.info ?? {};
  const output = typeof info.output === "string" ? info.output : "";
  const code = typeof info.exit_code === "number" ? info.exit_code : null;
  const error = typeof info.error === "string" ? info.error : "";
  return (
    <div data-testid="shell-output">
      <h3>Shell output{code !== null && <span className="muted small"> (exit code {code})</span>}</h3>
      {error && <p className="field-error">{error}</p>}
      <pre className="action">{output.trimEnd() || "(nothing printed)"}</pre>
    </div>
  );
}
