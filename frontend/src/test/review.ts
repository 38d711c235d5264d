/** Records and routes for the review, replay and datasets page tests. */
import type { ReviewEpisode } from "../api/review";
import { makeEpisode } from "./factories";
import type { Routes } from "./http";

export function reviewEpisode(id: number, extra: Partial<ReviewEpisode> = {}): ReviewEpisode {
  const { steps: _steps, ...rest } = makeEpisode();
  return {
    ...rest,
    id,
    status: "finished",
    reward: 1,
    task: { id: 3, task_name: "click-button", env_kind: "miniwob", split: "train" },
    created_by: { id: 2, username: "ann" },
    n_interventions: 0,
    n_void: 0,
    review_status: "unreviewed",
    review_summary: {},
    ...extra,
  };
}

export function baseRoutes(role: "annotator" | "manager"): Routes {
  return {
    "GET /api/v1/auth/session": { body: { user: { id: 1, username: "mia", is_staff: false } } },
    "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role, created_at: "" } },
    "GET /api/v1/projects/": { body: { results: [], next: null } },
    "GET /api/v1/health": { body: { status: "ok", checks: {} } },
    "GET /api/v1/projects/1/tasks/": {
      body: {
        results: [{ id: 3, env_kind: "miniwob", task_name: "click-button", instruction_template: "", seed_start: 0, seed_end: 99, split: "train", max_steps: 10 }],
        next: null,
      },
    },
    "GET /api/v1/projects/1/review-queues/": { body: { results: [] } },
    "GET /api/v1/projects/1/members/": { body: { results: [{ id: 1, user: { id: 2, username: "ann" }, role: "annotator" }], next: null } },
    "GET /api/v1/projects/1/deployments/": {
      body: { results: [{ id: 1, checkpoint: { id: 7, name: "v0" }, backend: "local", active: true, activated_at: null, deactivated_at: null, reason: "" }], next: null },
    },
  };
}

