import { useState } from "react";
import { ApiError, type FieldErrors } from "../api/client";

/**
 * The server's field errors of a failed request, each gone as soon as the person changes that field (`clear`): a
 * message about a value that is no longer there is not left beside the field. A new failure shows all of its own.
 * `regroup` moves messages to the form's own fields (an any-URL task's definition messages to the field each names).
 */
export function useServerErrors(
  error: unknown,
  regroup?: (errors: FieldErrors) => FieldErrors,
): { errors: FieldErrors; clear: (...fields: string[]) => void } {
  const [cleared, setCleared] = useState<{ error: unknown; fields: string[] }>({ error: null, fields: [] });
  const received = error instanceof ApiError ? error.fieldErrors : {};
  const all = regroup ? regroup(received) : received;
  const gone = cleared.error === error ? cleared.fields : [];
  const errors = Object.fromEntries(Object.entries(all).filter(([field]) => !gone.includes(field)));
  const clear = (...fields: string[]) => {
    if (fields.some((field) => field in all && !gone.includes(field))) setCleared({ error, fields: [...gone, ...fields] });
  };
  return { errors, clear };
}

/** The field errors that no field of the form shows: the ones for its banner. */
export function errorsElsewhere(errors: FieldErrors, shownBeside: readonly string[]): FieldErrors {
  return Object.fromEntries(Object.entries(errors).filter(([field]) => !shownBeside.includes(field)));
}
