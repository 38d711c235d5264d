/** A project's redaction policy and what it finds (annotation/api_redaction.py, core/redaction.py). */
import { apiFetch } from "./client";
import type { Schemas } from "./types";

export type Redaction = Schemas["RedactionOutput"];
export type RedactionPolicy = Redaction["policy"];

export const redactionKeys = {
  project: (projectId: number) => ["project", projectId, "redaction"] as const,
};

export const redactionGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Redaction>(`projects/${projectId}/redaction`, { signal });

export interface RedactionMarkInput {
  kind: string;
  verdict: "wrong_hit" | "missed";
  text: string;
  episode?: number;
  step?: number;
}

/** A reviewer's check: a wrong hit (not personal data) or a miss; the same mark twice is one. */
export const redactionMark = (projectId: number, mark: RedactionMarkInput) =>
  apiFetch<Redaction>(`projects/${projectId}/redaction/marks`, { method: "POST", body: mark });

/** The whole policy; switching it off needs an admin and a reason. */
export const redactionSet = (projectId: number, policy: RedactionPolicy, reason: string) =>
  apiFetch<Redaction>(`projects/${projectId}/redaction`, { method: "PUT", body: { policy, reason } });
