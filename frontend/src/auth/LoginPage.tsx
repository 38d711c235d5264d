import { type FormEvent, useState } from "react";
import { Navigate, useLocation, useNavigate } from "react-router";
import { ApiError } from "../api/client";
import { ErrorBanner } from "../components/ErrorBanner";
import { useLogin, useSession } from "../components/useSession";
import "./auth.css";

/** Where to go after logging in: back where the person was sent from, never off-site. */
function returnPath(state: unknown): string {
  const from = (state as { from?: unknown } | null)?.from;
  return typeof from === "string" && from.startsWith("/") && !from.startsWith("//") && from !== "/login"
    ? from
    : "/";
}

/** What to tell the person when logging in failed; the server's own words when it sent some. */
export function loginErrorMessage(error: unknown): string {
  if (!(error instanceof ApiError)) return "Logging in failed unexpectedly. Try again.";
  if (error.isNetwork) return error.detail;
  if (error.status === 429) {
    return error.detail || "Too many login attempts. Wait a minute before trying again.";
  }
  return error.detail;
}

export function LoginPage() {
  const session = useSession();
  const login = useLogin();
  const navigate = useNavigate();
  const location = useLocation();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const target = returnPath(location.state);

  if (session.user) return <Navigate to={target} replace />;

  function submit(event: FormEvent) {
    event.preventDefault();
    login.mutate(
      { username: username.trim(), password },
      { onSuccess: () => navigate(target, { replace: true }) },
    );
  }

  const error = login.error;
  const fieldErrors = error instanceof ApiError ? error.fieldErrors : {};

  return (
    <main className="login-page">
      <form className="card login-card" onSubmit={submit} aria-labelledby="login-title" noValidate>
        <div className="login-brand" aria-hidden="true">
          <span className="brand-mark" /> Loupe
        </div>
        <h1 id="login-title">Log in</h1>
        <p className="muted">Watch agents act, steer them, and turn what you did into training data.</p>

        {error && (
          <ErrorBanner
            message={loginErrorMessage(error)}
            title={error instanceof ApiError && error.status === 429 ? "Too many attempts" : "Could not log in"}
            fieldErrors={{}}
          />
        )}

        <label className="field">
          <span>Username</span>
          <input
            data-testid="login-username"
            name="username"
            autoComplete="username"
            autoFocus
            required
            value={username}
            onChange={(e) => setUsername(e.target.value)}
            aria-invalid={Boolean(fieldErrors.username)}
          />
          {fieldErrors.username && <span className="field-error">{fieldErrors.username.join(" ")}</span>}
        </label>
        <label className="field">
          <span>Password</span>
          <input
            data-testid="login-password"
            name="password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            aria-invalid={Boolean(fieldErrors.password)}
          />
          {fieldErrors.password && <span className="field-error">{fieldErrors.password.join(" ")}</span>}
        </label>
        <button
          type="submit"
          className="button primary wide"
          data-testid="login-submit"
          disabled={login.isPending || !username.trim() || !password}
        >
          {login.isPending ? "Logging in…" : "Log in"}
        </button>
      </form>
    </main>
  );
}
