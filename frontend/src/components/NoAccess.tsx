import { Link } from "react-router";
import { ApiError } from "../api/client";
import { ErrorBanner } from "./ErrorBanner";

export type Resource = "project" | "episode";

const NOT_FOUND: Record<Resource, string> = {
  project: "You are not a member of this project, or it does not exist",
  episode: "This episode does not exist or you have no access to it",
};
const FORBIDDEN: Record<Resource, string> = {
  project: "You do not have access to this project",
  episode: "You do not have access to this episode",
};
const WHAT_NOW = "Only a project's members can open it and its episodes; ask one of its admins to add you.";

/** Whether the server refused for good (no access, no such record): trying again cannot help. */
export function isNoAccess(error: unknown): error is ApiError {
  return error instanceof ApiError && (error.status === 403 || error.status === 404);
}

/**
 * A page's own record (its project or episode) could not be loaded. When the server says it is not
 * there for you (403/404: the API does not reveal which of a project's records exist to non-members),
 * say so plainly and lead back to the person's projects, with no Retry; any other failure is a
 * banner with Retry.
 */
export function LoadError({
  error,
  resource,
  title,
  onRetry,
}: {
  error: unknown;
  resource: Resource;
  /** The banner's heading for other failures. */
  title?: string;
  onRetry?: () => void;
}) {
  if (!isNoAccess(error)) return <ErrorBanner error={error} title={title} onRetry={onRetry} />;
  const heading = error.status === 404 ? NOT_FOUND[resource] : FORBIDDEN[resource];
  return (
    <div className="banner banner-error" role="alert" data-testid="no-access" data-status={error.status}>
      <div className="banner-body">
        <strong>{heading}</strong>
        <p>{error.status === 404 ? WHAT_NOW : error.detail}</p>
        <p>
          <Link to="/" data-testid="no-access-home">
            Back to your projects
          </Link>
        </p>
      </div>
    </div>
  );
}
