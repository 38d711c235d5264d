import type { User } from "../api/auth";
import type { Project } from "../api/projects";

/** Managers and admins edit the project and its tasks; staff may do everything. */
export function canManage(project: Project | undefined, user: User | null): boolean {
  return Boolean(user?.is_staff || project?.role === "manager" || project?.role === "admin");
}

/** Only admins change who is in a project. */
export function canAdminister(project: Project | undefined, user: User | null): boolean {
  return Boolean(user?.is_staff || project?.role === "admin");
}
