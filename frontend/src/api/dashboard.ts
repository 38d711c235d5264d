/** The project's dashboard series and reviewer agreement (`GET /projects/<id>/dashboard`, managers). */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type Agreement = Schemas["ReviewAgreementOutput"];
export type DashboardData = Schemas["DashboardOutput"];

export const dashboardGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<DashboardData>(`projects/${projectId}/dashboard`, { signal });
