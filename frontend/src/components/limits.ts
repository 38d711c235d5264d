/**
 * The longest text a person may type into each field, in characters: the same numbers as the server's
 * core/limits.py (tests/core/test_limits.py keeps them equal). Text is never cut: past the limit the field says
 * so and its form does not send.
 */
export const LIMITS = {
  project_name: 200,
  snapshot_name: 200,
  queue_name: 200,
  token_name: 100,
  task_id: 100,
  task_instruction: 4000,
  review_comment: 10000,
  adjudication_comment: 10000,
  reject_reason: 4000,
  human_thought: 10000,
  finish_comment: 10000,
  typed_text: 10000,
  call_user_answer: 4000,
} as const;

export type LimitKind = keyof typeof LIMITS;

/** The counter shows from this share of the limit on. */
const SHOW_FROM = 0.8;

export function isOverLimit(kind: LimitKind, value: string): boolean {
  return value.length > LIMITS[kind];
}

/** What the field says about its length: nothing while far from the limit, a count near it, an error past it. */
export function limitText(kind: LimitKind, value: string): { text: string; over: boolean } | null {
  const limit = LIMITS[kind];
  if (value.length < limit * SHOW_FROM) return null;
  const over = value.length > limit;
  const count = `${value.length.toLocaleString("en")} / ${limit.toLocaleString("en")} characters`;
  return { text: over ? `${count}: ${(value.length - limit).toLocaleString("en")} too many, shorten it to send` : count, over };
}
