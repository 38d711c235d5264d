/**
 * Why an episode ended, in plain words. The server stores a code, sometimes followed by
 * `: <detail>` (agent/rollout.py END_REASONS; flywheel/rollout_worker.py; flywheel/services.py
 * episode_start and episodes_mark_interrupted; annotation/supervision.py SupervisorIdle). Every
 * page that shows `end_reason` calls `describeEndReason`, so a person never reads a raw code.
 */

/** Known codes, what they mean; `{detail}` is replaced by the text after the code's colon. */
const REASONS: Record<string, { text: string; withDetail?: string }> = {
  done: { text: "The task ended (the page reported it done)." },
  finished: { text: "The agent said it had finished the task." },
  max_steps: { text: "It reached the task's step limit." },
  void_turns: { text: "The model's answers could not be read as actions several times in a row." },
  env_error: { text: "The environment (the browser page) failed.", withDetail: "The environment (the browser page) failed: {detail}" },
  "environment failed": {
    text: "The environment (the browser page) failed.",
    withDetail: "The environment (the browser page) failed: {detail}",
  },
  policy_error: { text: "The model could not be asked for its next step.", withDetail: "The model could not be asked for its next step: {detail}" },
  supervisor_finish: { text: "A person finished the episode.", withDetail: "A person ended the episode: {detail}" },
  rejected_too_often: { text: "The model's proposals for one step were rejected too many times." },
  "no deployed policy": { text: "The project has no deployed policy to act with." },
  stopped: { text: "It was stopped." },
  interrupted: { text: "It was interrupted." },
};

/** Details that are codes themselves (`supervisor_finish: rejected_too_often`). */
const DETAILS: Record<string, string> = {
  rejected_too_often: "A person rejected the model's proposals for one step too many times.",
};

const sentence = (text: string) => {
  const trimmed = text.trim();
  if (!trimmed) return "";
  const capital = trimmed[0].toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
};

/** A code nobody mapped yet, written readably: `some_new_code` reads "Some new code." */
const readable = (code: string) => sentence(code.replace(/_+/g, " "));

export function describeEndReason(reason: string | null | undefined): string {
  const raw = (reason ?? "").trim();
  if (!raw) return "";
  const colon = raw.indexOf(":");
  const code = (colon >= 0 ? raw.slice(0, colon) : raw).trim();
  const detail = colon >= 0 ? raw.slice(colon + 1).trim() : "";
  if (!code) return sentence(detail);
  const known = REASONS[code];
  if (known) {
    if (!detail) return known.text;
    if (DETAILS[detail]) return DETAILS[detail];
    return known.withDetail ? known.withDetail.replace("{detail}", detail) : `${known.text.replace(/\.$/, "")}: ${detail}`;
  }
  // A Python exception name (`RuntimeError: boom`): the rollout itself crashed.
  if (/^[A-Z]\w*(Error|Exception)$/.test(code)) return `The rollout crashed: ${raw}`;
  if (/^worker .* stopped responding$/.test(raw)) return `The rollout ${raw}.`;
  return colon >= 0 ? `${readable(code).replace(/\.$/, "")}: ${detail}` : readable(raw);
}
