import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { DashboardData } from "../api/dashboard";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";
import type { Routing, Snapshot } from "../api/datasets";
import { describeFilter, formatBytes } from "./SnapshotList";

afterEach(() => vi.unstubAllGlobals());

const bucket = (rows: number, newRows = rows, episodes = 1) => ({ rows, episodes, new_rows: newRows });
const routing = (extra: Partial<Routing> = {}): Routing => ({
  rule: "reward",
  reward_threshold: 1,
  buckets: { sft: bucket(6, 6, 3), rft: bucket(4, 4, 2), ct: bucket(0, 0, 0), dpo: bucket(1), rl: bucket(2, 2, 2), prm: bucket(3, 1, 3) },
  ...extra,
});

function snapshot(extra: Partial<Snapshot> = {}): Snapshot {
  return {
    id: 21, project: 1, kind: "sft", name: "first freeze", filter: {}, routing: { rule: "reward", reward_threshold: 1 },
    status: "ready", progress: 1, error: "", rows: 6, episodes: 3, sha256: "ab".repeat(32), size_bytes: 2048,
    lineage: {}, created_by: { id: 1, username: "mia" }, created_at: "2026-01-02T10:00:00Z", started_at: "2026-01-02T10:00:01Z", finished_at: "2026-01-02T10:00:05Z",
    export_url: "/api/v1/snapshots/21/export", duplicate: false, ...extra,
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

  it("keeps a pasted 5,000-character snapshot name whole, says it is too long and does not send it", async () => {
    const { requests } = mockFetch(routes());
    renderApp("/projects/1/datasets");
    const input = (await screen.findByTestId("snapshot-name")) as HTMLInputElement;
    expect(input.hasAttribute("maxlength")).toBe(false); // maxLength would cut a paste without a word
    const long = "n".repeat(5000);
    fireEvent.change(input, { target: { value: long } });
    expect(input.value).toBe(long);
    expect(screen.getByTestId("limit-snapshot_name").textContent).toBe("5,000 / 200 characters: 4,800 too many, shorten it to send");
    expect((screen.getByTestId("snapshot-create") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.submit(screen.getByRole("form", { name: "Freeze a snapshot" }));
    expect(requests.some((r) => r.method === "POST")).toBe(false);
    fireEvent.change(input, { target: { value: "n".repeat(170) } });
    expect(screen.getByTestId("limit-snapshot_name").textContent).toBe("170 / 200 characters"); // near the limit
    expect((screen.getByTestId("snapshot-create") as HTMLButtonElement).disabled).toBe(false);
  });

  it("shows the server's refusal of the name beside it, once, and drops it when the name is changed", async () => {
    const message = "The snapshot name is 201 characters long; the limit is 200. Shorten it and send it again: nothing was saved.";
    mockFetch(routes({ "POST /api/v1/projects/1/snapshots/": { status: 400, body: { detail: `name: ${message}`, errors: { name: [message] } } } }));
    renderApp("/projects/1/datasets");
    const input = await screen.findByTestId("snapshot-name");
    fireEvent.change(input, { target: { value: "first" } });
    fireEvent.click(screen.getByTestId("snapshot-create"));
    const field = input.closest(".field") as HTMLElement;
    await waitFor(() => expect(field.querySelector(".field-error")?.textContent).toBe(message));
    expect(document.body.textContent?.split(message).length).toBe(2); // said once
    expect(input.getAttribute("aria-describedby")).toContain(field.querySelector(".field-error")!.id);
    fireEvent.change(input, { target: { value: "second" } });
    expect(field.querySelector(".field-error")).toBeNull();
    expect(screen.queryByTestId("error-banner")).toBeNull();
  });

  it("offers process-reward (PRM) snapshots with their bucket, and freezes one", async () => {
    const { requests } = mockFetch(
      routes({ "POST /api/v1/projects/1/snapshots/": { status: 201, body: snapshot({ id: 30, kind: "prm", name: "labels", status: "building", progress: 0 }) } }),
    );
    renderApp("/projects/1/datasets");
    expect((await screen.findByTestId("bucket-prm")).textContent).toContain("3 rows");
    const kind = screen.getByTestId("snapshot-kind") as HTMLSelectElement;
    expect([...kind.options].map((o) => o.textContent)).toContain("PRM — 3 rows");
    fireEvent.change(kind, { target: { value: "prm" } });
    expect(screen.getByText(/up to an episode's first bad step, in TRL's prompt \/ completions \/ labels format/)).toBeTruthy();
    fireEvent.click(screen.getByTestId("snapshot-create"));
    await screen.findByTestId("snapshot-freeze-result");
    expect(requests.find((r) => r.method === "POST")?.body).toMatchObject({ kind: "prm" });
  });

  it("tells an annotator that datasets are for managers, asking the server for nothing", async () => {
    const { requests } = mockFetch(baseRoutes("annotator"));
    renderApp("/projects/1/datasets");
    expect((await screen.findByTestId("managers-only")).textContent).toContain("Only managers");
    expect(screen.queryByTestId("snapshot-create")).toBeNull();
    expect(requests.some((r) => r.url.includes("/routing") || r.url.includes("/snapshots"))).toBe(false);
  });
});

describe("DatasetsPage: nothing a manager does is silent", () => {
  it("says a second freeze of the same data made no copy, and sends one request however often Freeze is pressed", async () => {
    const { fn, requests } = mockFetch(
      routes({
        "GET /api/v1/projects/1/snapshots/": { body: { results: [snapshot()], next: null } },
        "POST /api/v1/projects/1/snapshots/": { status: 200, body: { ...snapshot(), duplicate: true } },
      }),
    );
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    vi.stubGlobal("fetch", async (input: RequestInfo | URL, init?: RequestInit) => {
      if (init?.method === "POST") await held;
      return fn(input, init);
    });
    renderApp("/projects/1/datasets");
    await screen.findByTestId("snapshot-row");
    const freeze = screen.getByTestId("snapshot-create") as HTMLButtonElement;
    fireEvent.click(freeze);
    await waitFor(() => expect(freeze.disabled).toBe(true));
    fireEvent.click(freeze);
    fireEvent.submit(freeze.closest("form")!); // even a submit the disabled button would not stop
    release();
    const result = await screen.findByTestId("snapshot-freeze-result");
    expect(result.textContent).toBe("Already frozen as snapshot #21 (“first freeze”): nothing new since, so no second copy was made.");
    expect(result.getAttribute("data-duplicate")).toBe("true");
    expect(requests.filter((r) => r.method === "POST")).toHaveLength(1);
    expect(screen.getAllByTestId("snapshot-row")).toHaveLength(1);
    expect(freeze.disabled).toBe(false);
  });

  it("says when the same data is being frozen right now", async () => {
    const building = snapshot({ status: "building", progress: 0.2, rows: 0, sha256: "", duplicate: true });
    mockFetch(routes({ "POST /api/v1/projects/1/snapshots/": { status: 200, body: building } }));
    renderApp("/projects/1/datasets");
    fireEvent.click(await screen.findByTestId("snapshot-create"));
    expect((await screen.findByTestId("snapshot-freeze-result")).textContent).toBe(
      "Already being frozen as snapshot #21 (“first freeze”): the same data, so no second copy was made.",
    );
  });

  it("shows a snapshot waiting for a worker as waiting, not as a 0 % bar, then its progress once started", async () => {
    let polls = 0;
    mockFetch(
      routes({
        "GET /api/v1/projects/1/snapshots/": () => {
          polls += 1;
          const s = polls === 1
            ? snapshot({ status: "building", progress: 0, rows: 0, sha256: "", started_at: null })
            : snapshot({ status: "building", progress: 0.55, rows: 0, sha256: "" });
          return { body: { results: [s], next: null } };
        },
      }),
    );
    renderApp("/projects/1/datasets");
    expect((await screen.findByTestId("snapshot-waiting")).textContent).toBe("Waiting for a free worker…");
    expect(screen.queryByTestId("snapshot-progress")).toBeNull();
    const bar = await screen.findByTestId("snapshot-progress", {}, { timeout: 3000 });
    expect(bar.getAttribute("aria-valuenow")).toBe("55");
    expect(screen.queryByTestId("snapshot-waiting")).toBeNull();
  });

  it("keeps the routing threshold between 0 and 1, and shows the server's refusal beside it", async () => {
    const { requests } = mockFetch(
      routes({
        "PATCH /api/v1/projects/1/routing": {
          status: 400,
          body: {
            detail: "reward_threshold: Ensure this value is less than or equal to 1.",
            errors: { reward_threshold: ["Ensure this value is less than or equal to 1."] },
          },
        },
      }),
    );
    renderApp("/projects/1/datasets");
    const threshold = (await screen.findByTestId("routing-threshold")) as HTMLInputElement;
    expect([threshold.min, threshold.max, threshold.step]).toEqual(["0", "1", "0.05"]);
    const save = screen.getByTestId("routing-save") as HTMLButtonElement;
    for (const bad of ["7", "-3", ""]) {
      fireEvent.change(threshold, { target: { value: bad } });
      expect(screen.getByTestId("routing-threshold-error").textContent).toContain("a number from 0 to 1");
      expect(save.disabled).toBe(true);
    }
    fireEvent.change(threshold, { target: { value: "0.5" } });
    expect(screen.queryByTestId("routing-threshold-error")).toBeNull();
    fireEvent.click(save);
    expect((await screen.findByTestId("routing-threshold-error")).textContent).toBe("Refused: Ensure this value is less than or equal to 1.");
    const banner = screen.getByRole("alert");
    expect(banner.textContent).toContain("The routing was not changed");
    expect(banner.textContent).not.toContain("reward_threshold");
    expect(requests.filter((r) => r.method === "PATCH").map((r) => r.body)).toEqual([{ rule: "reward", reward_threshold: 0.5 }]);
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
