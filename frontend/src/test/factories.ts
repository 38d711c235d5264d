/** Records shaped like the API returns them, for tests. */
import type { EpisodeDetail, Step } from "../api/types";

export function makeStep(index: number, extra: Partial<Step> = {}): Step {
  return {
    index,
    actor: "model",
    thought: `thought ${index}`,
    action: { name: "click", args: { x: 10 * index, y: 5 } },
    action_text: `click(x=${10 * index}, y=5)`,
    void: false,
    void_reason: "",
    proposal: null,
    reward: null,
    screenshot_url: `/media/shot-${index}.png`,
    width: 160,
    height: 210,
    url: "file:///miniwob/click-button.html",
    human_thought: "",
    created_at: "2026-01-01T00:00:00Z",
    ...extra,
  };
}

export function makeEpisode(steps: Step[] = []): EpisodeDetail {
  return {
    id: 42,
    project: 1,
    task: { id: 3, task_name: "click-button", env_kind: "miniwob" },
    seed: 7,
    mode: "supervised",
    status: "running",
    outcome: "",
    reward: null,
    end_reason: "",
    checkpoint: { id: 1, name: "tiny-0" },
    n_steps: steps.length,
    created_at: "2026-01-01T00:00:00Z",
    started_at: "2026-01-01T00:00:01Z",
    finished_at: null,
    queue: null,
    steps,
  };
}
