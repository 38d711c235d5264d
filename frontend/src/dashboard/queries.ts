/** The project's dashboard as server state (the call and its shape are in api/dashboard.ts). */
import { useQuery } from "@tanstack/react-query";
import { dashboardGet, dashboardKeys } from "../api/dashboard";

export function useDashboard(projectId: number) {
  return useQuery({
    queryKey: dashboardKeys.detail(projectId),
    queryFn: ({ signal }) => dashboardGet(projectId, signal),
    enabled: Number.isFinite(projectId),
    refetchInterval: 60_000,
  });
}
