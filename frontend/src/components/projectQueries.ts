/** Hooks for project server state, shared by every page that shows a project. */
import { useQuery } from "@tanstack/react-query";
import { memberList, projectGet, projectKeys, projectList } from "../api/projects";
import { taskKeys, taskList } from "../api/tasks";

export function useProjects() {
  return useQuery({ queryKey: projectKeys.list(), queryFn: ({ signal }) => projectList(signal) });
}

export function useProject(projectId: number) {
  return useQuery({
    queryKey: projectKeys.detail(projectId),
    queryFn: ({ signal }) => projectGet(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

export function useTasks(projectId: number) {
  return useQuery({
    queryKey: taskKeys.list(projectId),
    queryFn: ({ signal }) => taskList(projectId, signal),
    enabled: Number.isFinite(projectId),
  });
}

export function useMembers(projectId: number, enabled = true) {
  return useQuery({
    queryKey: projectKeys.members(projectId),
    queryFn: ({ signal }) => memberList(projectId, signal),
    enabled: enabled && Number.isFinite(projectId),
  });
}
