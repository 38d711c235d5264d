import { type LimitKind, limitText } from "./limits";

/**
 * The character count of a field near its limit, and the reason its form will not send past it; nothing while the
 * text is short. Give the field `aria-describedby={id}` so a screen reader reads it with the field.
 */
export function LimitCounter({ kind, value, id }: { kind: LimitKind; value: string; id?: string }) {
  const shown = limitText(kind, value);
  if (!shown) return null;
  return (
    <span
      id={id}
      className={shown.over ? "limit-counter over" : "limit-counter"}
      role={shown.over ? "alert" : undefined}
      data-testid={`limit-${kind}`}
    >
      {shown.text}
    </span>
  );
}
