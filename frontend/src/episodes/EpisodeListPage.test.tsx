import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Episode } from "../api/episodes";
import { makeEpisode } from "../test/factories";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";

afterEach(() => vi.unstubAllGlobals());

function episode(id: number, status: Episode["status"], extra: Partial<Episode> = {}): Episode {
  const { steps: _steps, ...rest } = makeEpisode();
  return { ...rest, id, status, ...extra };
}

const page = (results: Episode[]) => ({ body: { results, next: null } });

function routes(role: "annotator" | "manager", extra: Routes = {}): Routes {
  return {
    "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
    "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role, created_at: "" } },
    "GET /api/v1/projects/": { body: { results: [], next: null } },
    "GET /api/v1/health": { body: { status: "ok", checks: {} } },
    "GET /api/v1/projects/1/tasks/": {
      body: {
        results: [{ id: 3, env_kind: "miniwob", task_name: "click-button", instruction_template: "", seed_start: 0, seed_end: 99, split: "train", max_steps: 10 }],
        next: null,
      },
    },
    "GET /api/v1/episodes/?project=1&status=paused": page([episode(8, "paused", { pending_index: 2, control: null })]),
    "GET /api/v1/episodes/?project=1&status=running": page([episode(9, "running", { control: { username: "bob" } })]),
    "GET /api/v1/episodes/?project=1&status=queued": page([]),
    "GET /api/v1/episodes/?project=1": page([episode(9, "running"), episode(8, "paused"), episode(7, "finished")]),
    "GET /api/v1/projects/1/asks": { body: [] },
    ...extra,
  };
}

describe("EpisodeListPage (the queue)", () => {
  it("lists the episodes whose model asks for a person first, longest wait first, with why", async () => {
    const ask = (episodeId: number, waited: number, reason: string) => ({
      episode: episodeId, task: "click-button", seed: 5, reason, step: 0, asked_at: "", waited_seconds: waited, control: null,
    });
    mockFetch(
      routes("annotator", {
        "GET /api/v1/projects/1/asks": { body: [ask(8, 95, "confidence 0.31 < 0.5"), ask(6, 4, "confidence 0.12 < 0.5")] },
      }),
    );
    renderApp("/projects/1/episodes");
    const asks = await screen.findAllByTestId("ask-item");
    expect(asks.map((a) => a.getAttribute("href"))).toEqual(["/episodes/8", "/episodes/6"]);
    expect(asks[0].textContent).toContain("Step 1: unsure (confidence 0.31 < 0.5)");
    expect(asks[0].textContent).toContain("waiting 1 min");
    expect(asks[1].textContent).toContain("waiting 4 s");
  });

  it("lists live episodes to join first, waiting ones before running ones", async () => {
    mockFetch(routes("annotator"));
    renderApp("/projects/1/episodes");
    const items = await screen.findAllByTestId("queue-item");
    expect(items.map((i) => i.getAttribute("href"))).toEqual(["/episodes/8", "/episodes/9"]);
    expect(items[0].textContent).toContain("a step awaits a decision");
    expect(items[1].textContent).toContain("bob controls");
    expect((await screen.findByTestId("episode-table")).querySelectorAll("tbody tr")).toHaveLength(3);
  });

  it("says in plain words why each ended episode ended, never the stored code", async () => {
    mockFetch(
      routes("annotator", {
        "GET /api/v1/episodes/?project=1": page([
          episode(9, "running"),
          episode(8, "failed", { end_reason: "env_error: page crashed" }),
          episode(7, "finished", { end_reason: "max_steps" }),
        ]),
      }),
    );
    renderApp("/projects/1/episodes");
    const rows = (await screen.findByTestId("episode-table")).querySelectorAll("tbody tr");
    expect(rows[0].querySelector("[data-testid=end-reason]")).toBeNull();
    expect(rows[1].textContent).toContain("The environment (the browser page) failed: page crashed");
    expect(rows[2].textContent).toContain("It reached the task's step limit.");
    expect(rows[2].textContent).not.toContain("max_steps");
  });

  it("starts a supervised episode for an annotator, who is not offered autonomous mode", async () => {
    const { requests } = mockFetch(
      routes("annotator", { "POST /api/v1/projects/1/episodes/": { status: 201, body: { results: [episode(10, "queued")] } } }),
    );
    renderApp("/projects/1/episodes");
    await screen.findByTestId("start-task");
    expect(screen.queryByTestId("start-mode")).toBeNull();
    fireEvent.change(screen.getByTestId("start-seed"), { target: { value: "4" } });
    fireEvent.click(screen.getByTestId("start-submit"));
    await waitFor(() => expect(screen.getByTestId("location").textContent).toBe("/episodes/10"));
    expect(requests.find((r) => r.method === "POST")?.body).toEqual({ task: 3, seeds: [4], mode: "supervised" });
  });

  it("says a supervised episode takes one seed, and a range only for an autonomous batch", async () => {
    const { requests } = mockFetch(routes("manager"));
    renderApp("/projects/1/episodes");
    await screen.findByTestId("start-mode");
    expect(screen.getByTestId("seed-help").textContent).toBe(
      "One seed (allowed 0–99): a supervised episode has you at it, so it starts one at a time.",
    );
    fireEvent.change(screen.getByTestId("start-seed"), { target: { value: "1-2" } });
    fireEvent.click(screen.getByTestId("start-submit"));
    const seedField = screen.getByTestId("start-seed").closest(".field") as HTMLElement;
    expect(seedField.querySelector(".field-error")?.textContent).toMatch(/^A supervised episode starts one at a time/);
    expect(requests.some((r) => r.method === "POST")).toBe(false);
    fireEvent.change(screen.getByTestId("start-mode"), { target: { value: "autonomous" } });
    expect(seedField.querySelector(".field-error")).toBeNull();
    expect(screen.getByTestId("seed-help").textContent).toContain("a range (0-4)");
  });

  it("lets a manager choose autonomous, and shows the server's refusal as it is", async () => {
    mockFetch(
      routes("manager", {
        "POST /api/v1/projects/1/episodes/": {
          status: 403,
          body: { detail: "Starting autonomous batches needs the manager role; start a supervised episode instead." },
        },
      }),
    );
    renderApp("/projects/1/episodes");
    fireEvent.change(await screen.findByTestId("start-mode"), { target: { value: "autonomous" } });
    expect(screen.getByTestId("start-submit").textContent).toBe("Start autonomous batch");
    fireEvent.click(screen.getByTestId("start-submit"));
    expect((await screen.findByRole("alert")).textContent).toContain("needs the manager role");
  });

  it("shows each queued episode's place in line, in the live queue and in the table", async () => {
    const waiting = episode(11, "queued", { queue: { lane: "people", ahead: 2, running: 2 }, started_at: null });
    const next = episode(12, "queued", { queue: { lane: "people", ahead: 0, running: 2 }, started_at: null });
    mockFetch(
      routes("annotator", {
        "GET /api/v1/episodes/?project=1&status=queued": page([waiting, next]),
        "GET /api/v1/episodes/?project=1": page([next, waiting, episode(9, "running")]),
      }),
    );
    renderApp("/projects/1/episodes");
    const items = await screen.findAllByTestId("queue-item");
    const queued = items.filter((i) => i.getAttribute("data-status") === "queued");
    expect(queued.map((i) => i.textContent)).toEqual([
      expect.stringContaining("starting: 2 ahead · 2 running"),
      expect.stringContaining("starting: next in line · 2 running"),
    ]);
    const rows = (await screen.findByTestId("episode-table")).querySelectorAll("tbody tr");
    expect(rows[0].querySelector("[data-testid=queue-place]")?.textContent).toBe("next in line · 2 running");
    expect(rows[1].querySelector("[data-testid=queue-place]")?.textContent).toBe("2 ahead · 2 running");
    expect(rows[2].querySelector("[data-testid=queue-place]")).toBeNull();
  });
});
