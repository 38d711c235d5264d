import type { ReactNode } from "react";
import { Navigate, useLocation } from "react-router";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { useSession } from "../components/useSession";

/** Renders its children for a logged-in person; otherwise sends them to /login and back after. */
export function RequireAuth({ children }: { children: ReactNode }) {
  const session = useSession();
  const location = useLocation();

  if (session.isPending) return <Spinner label="Checking your session…" block />;
  if (session.isError && session.data === undefined) {
    return (
      <main className="page page-narrow">
        <ErrorBanner error={session.error} onRetry={() => session.refetch()} />
      </main>
    );
  }
  if (!session.user) {
    const from = `${location.pathname}${location.search}${location.hash}`;
    return <Navigate to="/login" replace state={{ from }} />;
  }
  return <>{children}</>;
}
