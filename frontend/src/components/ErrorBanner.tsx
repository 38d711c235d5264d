import { ApiError, type FieldErrors } from "../api/client";

interface ErrorBannerProps {
  /** The failure to show; an ApiError shows its `detail` and field errors. */
  error?: unknown;
  /** A message to show instead of (or without) an error object. */
  message?: string;
  title?: string;
  /** Override the field errors shown (pass {} when a form shows them beside its fields). */
  fieldErrors?: FieldErrors;
  /**
   * The fields the form shows the server's errors beside: the banner never repeats them. When every error is about
   * one of them it only says that nothing was saved and where to look, and shows nothing once they are all fixed
   * (`fieldErrors` then holds the ones still shown).
   */
  besideFields?: readonly string[];
  onRetry?: () => void;
}

function describe(error: unknown): string {
  if (error instanceof ApiError) return error.detail;
  if (error instanceof Error && error.message) return error.message;
  return "Something went wrong. Try again.";
}

function heading(error: unknown): string {
  if (!(error instanceof ApiError)) return "Something went wrong";
  if (error.isNetwork) return "Server unreachable";
  if (error.status === 403) return "Not allowed";
  if (error.status === 404) return "Not found";
  return "Something went wrong";
}

/**
 * Whether trying the same request again may succeed: not after the server refused it for good
 * (a 4xx other than a timeout or a rate limit: no access, no such record, invalid input).
 */
export function isRetryable(error: unknown): boolean {
  if (!(error instanceof ApiError) || error.isNetwork) return true;
  return !(error.status >= 400 && error.status < 500 && error.status !== 408 && error.status !== 429);
}

/** A failure, said plainly, with what to do next (Retry only when trying again may help). */
export function ErrorBanner({ error, message, title, fieldErrors, besideFields, onRetry }: ErrorBannerProps) {
  const all = error instanceof ApiError ? error.fieldErrors : {};
  const fields = fieldErrors ?? all;
  let text = message ?? describe(error);
  let entries = Object.entries(fields);
  if (besideFields && Object.keys(all).length > 0) {
    const beside = entries.filter(([field]) => besideFields.includes(field));
    entries = entries.filter(([field]) => !besideFields.includes(field));
    const onlyBeside = Object.keys(all).every((field) => besideFields.includes(field));
    if (onlyBeside && message === undefined) {
      if (beside.length === 0) return null; // every field it was about has been changed since
      text = beside.length === 1 ? "Nothing was saved: the message beside the field says what to change." :
        "Nothing was saved: the messages beside the fields say what to change.";
    }
  }
  const retry = onRetry && isRetryable(error) ? onRetry : undefined;

  return (
    <div className="banner banner-error" role="alert" data-testid="error-banner">
      <div className="banner-body">
        <strong>{title ?? heading(error)}</strong>
        <p>{text}</p>
        {entries.length > 0 && (
          <ul className="banner-fields">
            {entries.map(([field, messages]) => (
              <li key={field}>
                <code>{field}</code>: {messages.join(" ")}
              </li>
            ))}
          </ul>
        )}
      </div>
      {retry && (
        <button type="button" className="button" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}
