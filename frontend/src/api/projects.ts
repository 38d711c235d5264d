/** Projects and their members (flywheel/api.py). */
import { apiFetch, fetchAll } from "./client";
import type { Schemas } from "./types";

export type Role = Schemas["RoleEnum"];
export type Project = Schemas["ProjectOutput"];
export type Member = Schemas["MemberOutput"];

export const projectKeys = {
  list: () => ["projects"] as const,
  detail: (projectId: number) => ["project", projectId] as const,
  members: (projectId: number) => ["project", projectId, "members"] as const,
};

export const projectList = (signal?: AbortSignal) => fetchAll<Project>("projects/", signal);

export const projectGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Project>(`projects/${projectId}/`, { signal });

export const projectUpdate = (
  projectId: number,
  changes: Partial<Pick<Project, "name" | "description">>,
) => apiFetch<Project>(`projects/${projectId}/`, { method: "PATCH", body: changes });

export const memberList = (projectId: number, signal?: AbortSignal) =>
  fetchAll<Member>(`projects/${projectId}/members/`, signal);

export const memberAdd = (projectId: number, username: string, role: Role) =>
  apiFetch<Member>(`projects/${projectId}/members/`, { method: "POST", body: { username, role } });

export const memberUpdate = (projectId: number, memberId: number, role: Role) =>
  apiFetch<Member>(`projects/${projectId}/members/${memberId}/`, { method: "PATCH", body: { role } });

export const memberRemove = (projectId: number, memberId: number) =>
  apiFetch<void>(`projects/${projectId}/members/${memberId}/`, { method: "DELETE" });
