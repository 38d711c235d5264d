/** The project's dashboard series and reviewer agreement (`GET /projects/<id>/dashboard`, managers). */
import { apiFetch } from "./client";

export interface Agreement {
  episodes_with_multiple_reviews: number;
  /** Share of multiply-reviewed episodes whose verdicts all agree; null with none. */
  agreement: number | null;
  /** Cohen's kappa over every pair of reviews of one episode; null when undefined. */
  kappa: number | null;
  reviewers: { username: string; reviews: number; accepts: number }[];
}

export interface DashboardData {
  success_by_checkpoint: { checkpoint: string; day: string; episodes: number; success_rate: number }[];
  interventions: { day: string; episodes: number; per_episode: number }[];
  void_rate: { day: string; steps: number; rate: number }[];
  annotator_throughput: { username: string; day: string; episodes: number; steps: number }[];
  dataset_growth: { created_at: string; kind: string; rows: number; name: string }[];
  agreement: Agreement;
}

export const dashboardGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<DashboardData>(`projects/${projectId}/dashboard`, { signal });
