import { useQuery } from "@tanstack/react-query";
import { ApiError } from "../api/client";
import { type Health, healthGet, healthKeys } from "../api/health";

/** One line per check, for the tooltip: "redis: ok", "celery: failing". */
export function healthSummary(health: Health): string {
  const lines = Object.entries(health.checks).map(([name, check]) => {
    const extra = typeof check.version === "string" ? ` (${check.version})` : "";
    const workers = Array.isArray(check.workers) ? ` (${check.workers.length} workers)` : "";
    const error = typeof check.error === "string" ? `: ${check.error}` : "";
    return `${name}: ${check.ok ? "ok" : "failing"}${extra}${workers}${check.ok ? "" : error}`;
  });
  return [`Server ${health.status}`, ...lines].join("\n");
}

/** Green when every check passes, amber when degraded, red when the server does not answer. */
export function HealthDot() {
  const health = useQuery({
    queryKey: healthKeys.report(),
    queryFn: ({ signal }) => healthGet(signal),
    refetchInterval: 30_000,
    retry: false,
  });

  let tone = "unknown";
  let label = "Checking server health…";
  if (health.data) {
    tone = health.data.status === "ok" ? "ok" : "degraded";
    label = healthSummary(health.data);
  } else if (health.error) {
    tone = "down";
    label = `Server health unknown: ${health.error instanceof ApiError ? health.error.detail : String(health.error)}`;
  }

  return (
    <span
      className={`health-dot health-${tone}`}
      data-testid="health-dot"
      data-status={tone}
      title={label}
      role="img"
      aria-label={label}
    />
  );
}
