import { type ReactNode, useId } from "react";
import { LimitCounter } from "./LimitCounter";
import { type LimitKind, isOverLimit, limitText } from "./limits";

/** What a field hands its control: the id its label points at, and the ids of what describes it. */
export interface FieldControl {
  id: string;
  "aria-describedby"?: string;
  "aria-invalid"?: true;
}

interface FieldProps {
  /** The label's text: the control's accessible name, and nothing else. */
  label: ReactNode;
  /** What the field is for, under it; read with the control. */
  help?: ReactNode;
  /** What is wrong with the value, said beside the field (empty, null or undefined: nothing). */
  problems?: string | string[] | null;
  /** Text a person types that has a limit: the counter shows near the limit and the reason past it. */
  limit?: { kind: LimitKind; value: string };
  className?: string;
  testId?: string;
  /** The test id of the problems' text. */
  problemsTestId?: string;
  children: (control: FieldControl) => ReactNode;
}

/**
 * A form field whose label is tied to its control (htmlFor/id) and whose help, character count and problems are
 * tied to it too (aria-describedby), all beside the control: a message is never far from what caused it.
 */
export function Field({ label, help, problems, limit, className, testId, problemsTestId, children }: FieldProps) {
  const id = useId();
  const messages = (Array.isArray(problems) ? problems : problems ? [problems] : []).filter(Boolean);
  const helpId = help ? `${id}-help` : undefined;
  const countId = limit && limitText(limit.kind, limit.value) ? `${id}-count` : undefined;
  const errorId = messages.length ? `${id}-error` : undefined;
  const describedBy = [helpId, countId, errorId].filter(Boolean).join(" ") || undefined;
  const invalid = messages.length > 0 || (limit !== undefined && isOverLimit(limit.kind, limit.value));
  return (
    <div className={className ? `field ${className}` : "field"} data-testid={testId}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-describedby": describedBy, "aria-invalid": invalid ? true : undefined })}
      {help && (
        <span id={helpId} className="muted small">
          {help}
        </span>
      )}
      {limit && <LimitCounter kind={limit.kind} value={limit.value} id={countId} />}
      {errorId && (
        <span id={errorId} className="field-error" data-testid={problemsTestId}>
          {messages.join(" ")}
        </span>
      )}
    </div>
  );
}
