/** The project's dashboard series and reviewer agreement (`GET /projects/<id>/dashboard`, managers). */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type Agreement = Schemas["ReviewAgreementOutput"];
export type DashboardData = Schemas["DashboardOutput"];

export const dashboardKeys = {
  detail: (projectId: number) => ["project", projectId, "dashboard"] as const,
};

export const dashboardGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<DashboardData>(`projects/${projectId}/dashboard`, { signal });
