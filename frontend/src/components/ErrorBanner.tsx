import { ApiError, type FieldErrors } from "../api/client";

interface ErrorBannerProps {
  /** The failure to show; an ApiError shows its `detail` and field errors. */
  error?: unknown;
  /** A message to show instead of (or without) an error object. */
  message?: string;
  title?: string;
  /** Override the field errors shown (pass {} when a form shows them beside its fields). */
  fieldErrors?: FieldErrors;
  onRetry?: () => void;
}

function describe(error: unknown): string {
  if (error instanceof ApiError) return error.detail;
  if (error instanceof Error && error.message) return error.message;
  return "Something went wrong. Try again.";
}

/** A failure, said plainly, with what to do next (retry when a network failure may pass). */
export function ErrorBanner({ error, message, title, fieldErrors, onRetry }: ErrorBannerProps) {
  const text = message ?? describe(error);
  const fields = fieldErrors ?? (error instanceof ApiError ? error.fieldErrors : {});
  const isNetwork = error instanceof ApiError && error.isNetwork;
  const heading = title ?? (isNetwork ? "Server unreachable" : "Something went wrong");
  const entries = Object.entries(fields);

  return (
    <div className="banner banner-error" role="alert" data-testid="error-banner">
      <div className="banner-body">
        <strong>{heading}</strong>
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
      {onRetry && (
        <button type="button" className="button" onClick={onRetry}>
          Retry
        </button>
      )}
    </div>
  );
}
