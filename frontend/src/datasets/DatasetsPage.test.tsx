import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { DashboardData } from "../dashboard/queries";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";
import type { Routing, Snapshot } from "./queries";
import { describeFilter, formatBytes } from "./SnapshotList";

afterEach(() => vi.unstubAllGlobals());

const bucket = (rows: number, newRows = rows, episodes = 1) => ({ rows, episodes, new_rows: newRows });
const routing = (extra: Partial<Routing> = {}): Routing => ({
  rule: "reward",
  reward_threshold: 1,
  buckets: { sft: bucket(6, 6, 3), rft: bucket(4, 4, 2), ct: bucket(0, 0, 0), dpo: bucket(1), rl: bucket(2, 2, 2) },
  ...extra,
});

function snapshot(extra: Partial<Snapshot> = {}): Snapshot {
  return {
    id: 21, project: 1, kind: "sft", name: "first freeze", filter: {}, routing: { rule: "reward", reward_threshold: 1 },
    status: "ready", progress: 1, error: "", rows: 6, episodes: 3, sha256: "ab".repeat(32), size_bytes: 2048,
    lineage: {}, created_by: { id: 1, username: "mia" }, created_at: "2026-01-02T10:00:00Z", finished_at: "2026-01-02T10:00:05Z",
    export_url: "/api/v1/snapshots/21/export", ...extra,
  };
}

const emptyDashboard: DashboardData = {
  success_by_checkpoint: [], interventions: [], void_rate: [], annotator_throughput: [], dataset_growth: [],
  agreement: { episodes_with_multiple_reviews: 0, agreement: null, kappa: null, reviewers: [] },
};

function routes(extra: Routes = {}): Routes {
  return {
    ...baseRoutes("manager"),
    "GET /api/v1/projects/1/routing": { body: routing() },
    "GET /api/v1/projects/1/snapshots/": { body: { results: [], next: null } },
    "GET /api/v1/projects/1/dashboard": { body: emptyDashboard },
    ...extra,
  };
}

describe("DatasetsPage", () => {
  it("shows each bucket's rows and what is new, and saves a new validator rule", async () => {
    const { requests } = mockFetch(
      routes({ "PATCH /api/v1/projects/1/routing": { body: routing({ rule: "both", reward_threshold: 0.5, buckets: { ...routing().buckets, sft: bucket(2, 2, 1) } }) } }),
    );
    renderApp("/projects/1/datasets");
    const sft = await screen.findByTestId("bucket-sft");
    expect(sft.textContent).toContain("6 rows");
    expect(sft.textContent).toContain("+6 new");
    expect(screen.getByTestId("bucket-rft").textContent).toContain("4 rows");
    expect(screen.getByTestId("bucket-ct").textContent).toContain("nothing new");
    fireEvent.click(screen.getByTestId("routing-rule-both"));
    fireEvent.change(screen.getByTestId("routing-threshold"), { target: { value: "0.5" } });
    fireEvent.click(screen.getByTestId("routing-save"));
    await waitFor(() => expect(screen.getByTestId("bucket-sft").textContent).toContain("2 rows"));
    expect(requests.find((r) => r.method === "PATCH")?.body).toEqual({ rule: "both", reward_threshold: 0.5 });
  });

  it("freezes a filtered snapshot, shows it building until it is ready, then exports it and trains on it", async () => {
    let polls = 0;
    const { requests } = mockFetch(
      routes({
        "POST /api/v1/projects/1/snapshots/": { status: 202, body: snapshot({ status: "building", progress: 0, rows: 0, sha256: "", filter: { only_new: true, tasks: [3] } }) },
        "GET /api/v1/projects/1/snapshots/": () => {
          polls += 1;
          const s = polls <= 2 ? snapshot({ status: "building", progress: 0.4, rows: 0, sha256: "" }) : snapshot({ filter: { only_new: true, tasks: [3] } });
          return { body: { results: polls === 1 ? [] : [s], next: null } };
        },
        "POST /api/v1/projects/1/runs/": { status: 202, body: { id: 77, algorithm: "sft", status: "queued" } },
      }),
    );
    renderApp("/projects/1/datasets");
    await screen.findByTestId("snapshots-empty");
    fireEvent.change(screen.getByTestId("snapshot-name"), { target: { value: "first freeze" } });
    fireEvent.click(screen.getByTestId("snapshot-only-new"));
    fireEvent.click(await screen.findByTestId("snapshot-task-3"));
    fireEvent.click(screen.getByTestId("snapshot-create"));
    await waitFor(() => expect(screen.getByTestId("snapshot-row").getAttribute("data-status")).toBe("building"));
    expect(requests.find((r) => r.method === "POST")?.body).toEqual({ kind: "sft", name: "first freeze", filter: { only_new: true, tasks: [3] } });
    await waitFor(() => expect(screen.getByTestId("snapshot-progress").getAttribute("aria-valuenow")).toBe("40"));

    await waitFor(() => expect(screen.getByTestId("snapshot-row").getAttribute("data-status")).toBe("ready"), { timeout: 5000 });
    const row = screen.getByTestId("snapshot-row");
    expect(within(row).getByTestId("snapshot-rows").textContent).toBe("6");
    expect(within(row).getByTestId("snapshot-sha256").getAttribute("title")).toBe("ab".repeat(32));
    expect(row.textContent).toContain("2.0 KB");
    expect(row.textContent).toContain("only new · tasks click-button");
    expect(within(row).getByTestId("snapshot-download").getAttribute("href")).toBe("/api/v1/snapshots/21/export");
    // Ready: the bucket counts ("new since the last snapshot") are asked for again.
    await waitFor(() => expect(requests.filter((r) => r.url === "/api/v1/projects/1/routing").length).toBeGreaterThan(1));

    fireEvent.click(within(row).getByTestId("snapshot-train"));
    const queued = await screen.findByTestId("train-queued");
    expect(queued.textContent).toContain("SFT run #77 queued");
    expect(within(queued).getByRole("link").getAttribute("href")).toBe("/projects/1/runs");
    expect(requests.find((r) => r.url === "/api/v1/projects/1/runs/")?.body).toEqual({ snapshot: 21 });
  }, 15_000);

  it("shows an empty or invalid snapshot refused as the server says it", async () => {
    mockFetch(
      routes({
        "POST /api/v1/projects/1/snapshots/": {
          status: 400,
          body: { detail: "No dpo rows match this filter: nothing to snapshot. Finish or review episodes first, or widen the filter.", errors: { filter: ["Matches no rows."] } },
        },
      }),
    );
    renderApp("/projects/1/datasets");
    fireEvent.change(await screen.findByTestId("snapshot-kind"), { target: { value: "dpo" } });
    fireEvent.click(screen.getByTestId("snapshot-create"));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("No dpo rows match this filter");
    expect(alert.textContent).toContain("Matches no rows.");
  });

  it("tells an annotator that datasets are for managers, asking the server for nothing", async () => {
    const { requests } = mockFetch(baseRoutes("annotator"));
    renderApp("/projects/1/datasets");
    expect((await screen.findByTestId("managers-only")).textContent).toContain("Only managers");
    expect(screen.queryByTestId("snapshot-create")).toBeNull();
    expect(requests.some((r) => r.url.includes("/routing") || r.url.includes("/snapshots"))).toBe(false);
  });
});

describe("snapshot text", () => {
  it("says sizes and filters plainly", () => {
    expect(formatBytes(0)).toBe("0 B");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(5 * 1024 * 1024)).toBe("5.0 MB");
    expect(describeFilter({})).toBe("everything routed");
    expect(describeFilter({ split: "eval", created_after: "2026-01-01" }, {})).toBe("eval · 2026-01-01 to …");
  });
});
