/** The server's health report (`health`): the database, Redis, the channel layer and a live Celery worker. */
import { ApiError, apiFetch } from "./client";
import type { Schemas } from "./types";

export type HealthCheck = Schemas["HealthCheckOutput"];
export type Health = Schemas["HealthOutput"];

export const healthKeys = {
  report: () => ["health"] as const,
};

/**
 * The server's health report. A degraded server may answer 503 with the same body, so a 503
 * that carries `checks` is returned as a report rather than thrown.
 */
export async function healthGet(signal?: AbortSignal): Promise<Health> {
  try {
    return await apiFetch<Health>("health", { signal });
  } catch (error) {
    const body = error instanceof ApiError ? (error.body as Partial<Health> | undefined) : undefined;
    if (body && typeof body === "object" && body.checks) {
      return { status: "degraded", checks: body.checks };
    }
    throw error;
  }
}
