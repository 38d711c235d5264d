/** Deployments (flywheel/api_runs.py, flywheel/api_cycles.py): which checkpoint served when, and rolling back. */
import { apiFetch, type Page } from "./client";
import type { Schemas } from "./types";

export type Deployment = Schemas["DeploymentOutput"];

export const deploymentKeys = {
  list: (projectId: number) => ["project", projectId, "deployments"] as const,
};

export const deploymentList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<Deployment>>(`projects/${projectId}/deployments/`, { signal }).then((page) => page.results);

/** Serve an earlier deployment's checkpoint again (managers; one transaction on the server). */
export const deploymentRollback = (projectId: number, deploymentId: number) =>
  apiFetch<Schemas["DeploymentRolledBack"]>(`projects/${projectId}/deployments/${deploymentId}/rollback`, {
    method: "POST",
  });
