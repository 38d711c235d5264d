import { screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";
import type { DashboardData } from "../api/dashboard";
import { agreementBars, dayNumber, dayTicks, growthSeries, successSeries, throughputBars } from "./series";

afterEach(() => vi.unstubAllGlobals());

const data: DashboardData = {
  success_by_checkpoint: [
    { checkpoint: "v0", day: "2026-01-01", episodes: 4, success_rate: 0.25 },
    { checkpoint: "v0", day: "2026-01-02", episodes: 4, success_rate: 0.5 },
    { checkpoint: "v1", day: "2026-01-02", episodes: 2, success_rate: 1 },
  ],
  interventions: [{ day: "2026-01-02", episodes: 6, per_episode: 0.5 }],
  void_rate: [{ day: "2026-01-02", steps: 20, rate: 0.1 }],
  annotator_throughput: [
    { username: "ann", day: "2026-01-01", episodes: 1, steps: 5 },
    { username: "bob", day: "2026-01-02", episodes: 3, steps: 9 },
    { username: "ann", day: "2026-01-02", episodes: 1, steps: 4 },
  ],
  dataset_growth: [
    { created_at: "2026-01-01T12:00:00Z", kind: "sft", rows: 10, name: "a" },
    { created_at: "2026-01-02T12:00:00Z", kind: "sft", rows: 25, name: "b" },
    { created_at: "2026-01-02T13:00:00Z", kind: "dpo", rows: 3, name: "c" },
  ],
  agreement: { episodes_with_multiple_reviews: 4, agreement: 0.75, kappa: 0.4, reviewers: [{ username: "mia", reviews: 4, accepts: 3 }] },
};

describe("dashboard series", () => {
  it("turns the API's rows into one line a checkpoint, annotator totals and growth by kind", () => {
    const d1 = dayNumber("2026-01-01");
    expect(dayNumber("2026-01-02")).toBe(d1 + 1);
    expect(successSeries(data)).toEqual([
      { name: "v0", points: [{ x: d1, y: 0.25 }, { x: d1 + 1, y: 0.5 }] },
      { name: "v1", points: [{ x: d1 + 1, y: 1 }] },
    ]);
    expect(throughputBars(data).map((b) => [b.label, b.value])).toEqual([["bob", 3], ["ann", 2]]);
    expect(growthSeries(data).map((s) => [s.name, s.points.map((p) => p.y)])).toEqual([["sft", [10, 25]], ["dpo", [3]]]);
    expect(agreementBars(data).map((b) => b.value)).toEqual([0.75, 0.4]);
    expect(dayTicks([d1])).toEqual([d1]);
    expect(dayTicks([d1, d1 + 30], 6)).toEqual([d1, d1 + 5, d1 + 10, d1 + 15, d1 + 20, d1 + 25, d1 + 30]);
  });
});

describe("Dashboard on the Datasets page", () => {
  it("draws the series as charts, not tables", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      "GET /api/v1/projects/1/routing": {
        body: { rule: "reward", reward_threshold: 1, buckets: Object.fromEntries(["sft", "rft", "dpo", "rl", "ct"].map((k) => [k, { rows: 0, episodes: 0, new_rows: 0 }])) },
      },
      "GET /api/v1/projects/1/snapshots/": { body: { results: [], next: null } },
      "GET /api/v1/projects/1/dashboard": { body: data },
    });
    renderApp("/projects/1/datasets");
    const success = await screen.findByTestId("dash-success");
    expect([...success.querySelectorAll("path[data-series]")].map((p) => p.getAttribute("data-series"))).toEqual(["v0", "v1"]);
    expect(success.querySelectorAll("circle[data-point]")).toHaveLength(3);
    expect(screen.getByTestId("dash-throughput").querySelectorAll("rect.chart-bar")).toHaveLength(2);
    const agreement = screen.getByTestId("dash-agreement");
    expect(agreement.textContent).toContain("Over 4 episodes reviewed by two or more people");
    expect(agreement.textContent).toContain("0.75");
    expect(screen.getByTestId("dash-growth").querySelectorAll("path[data-series]")).toHaveLength(2);
  });
});
