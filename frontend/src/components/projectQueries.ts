/** Query keys and hooks for project server state, shared by every page that shows a project. */
import { useQuery } from "@tanstack/react-query";
import { memberList, projectGet, projectList, taskList } from "../api/client";

export const PROJECTS_KEY = ["projects"] as const;
export const projectKey = (projectId: number) => ["project", projectId] as const;
export const tasksKey = (projectId: number) => ["project", projectId, "tasks"] as const;
export const membersKey = (projectId: number) => ["project", projectId, "members"] as const;

export function useProjects() {
  return useQuery({ queryKey: PROJECTS_KEY, queryFn: ({ signal }) => projectList(signal) });
}

export function useProject(projectId: number) {
  return useQuery({
    queryKey: projectKey(projectId),
    queryFn: ({ signal }) => projectGet(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

export function useTasks(projectId: number) {
  return useQuery({
    queryKey: tasksKey(projectId),
    queryFn: ({ signal }) => taskList(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

export function useMembers(projectId: number, enabled = true) {
  return useQuery({
    queryKey: membersKey(projectId),
    queryFn: ({ signal }) => memberList(projectId, signal),
    enabled: enabled && Number.isFinite(projectId),
  });
}
