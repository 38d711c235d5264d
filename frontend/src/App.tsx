import { QueryClientProvider, type QueryClient } from "@tanstack/react-query";
import { BrowserRouter, Link, Route, Routes } from "react-router";
import { LoginPage } from "./auth/LoginPage";
import { RequireAuth } from "./shell/RequireAuth";
import { Layout } from "./shell/Layout";
import { DatasetsPage } from "./datasets/DatasetsPage";
import { EpisodeListPage } from "./episodes/EpisodeListPage";
import { SessionPage } from "./session/SessionPage";
import { ProjectListPage } from "./projects/ProjectListPage";
import { ProjectPage } from "./projects/ProjectPage";
import { ReplayPage } from "./review/ReplayPage";
import { BranchComparePage } from "./review/BranchCompare";
import { ReviewPage } from "./review/ReviewPage";
import { QueuePage } from "./review/QueuePage";
import { RunsPage } from "./runs/RunsPage";
import { CyclesPage } from "./cycles/CyclesPage";
import { TasksPage } from "./tasks/TasksPage";
import { StatusPage } from "./status/StatusPage";

function NotFoundPage() {
  return (
    <main className="page">
      <div className="empty-state card">
        <h1>Page not found</h1>
        <p>
          Nothing lives at this address. <Link to="/">Go to your projects.</Link>
        </p>
      </div>
    </main>
  );
}

/** Every route of the app; kept apart from the router so tests can mount it in a MemoryRouter. */
export function AppRoutes() {
  return (
    <Routes>
      <Route path="/login" element={<LoginPage />} />
      <Route
        element={
          <RequireAuth>
            <Layout />
          </RequireAuth>
        }
      >
        <Route index element={<ProjectListPage />} />
        <Route path="projects/:projectId" element={<ProjectPage />} />
        <Route path="projects/:projectId/tasks" element={<TasksPage />} />
        <Route path="projects/:projectId/episodes" element={<EpisodeListPage />} />
        <Route path="projects/:projectId/review" element={<ReviewPage />} />
        <Route path="projects/:projectId/review/:episodeId" element={<ReplayPage />} />
        <Route path="projects/:projectId/review/:episodeId/compare" element={<BranchComparePage />} />
        <Route path="projects/:projectId/review/queues/:queueId" element={<QueuePage />} />
        <Route path="projects/:projectId/datasets" element={<DatasetsPage />} />
        <Route path="projects/:projectId/runs" element={<RunsPage />} />
        <Route path="projects/:projectId/cycles" element={<CyclesPage />} />
        <Route path="episodes/:episodeId" element={<SessionPage />} />
        <Route path="status" element={<StatusPage />} />
        <Route path="*" element={<NotFoundPage />} />
      </Route>
    </Routes>
  );
}

export function App({ queryClient }: { queryClient: QueryClient }) {
  return (
    <QueryClientProvider client={queryClient}>
      <BrowserRouter>
        <AppRoutes />
      </BrowserRouter>
    </QueryClientProvider>
  );
}
