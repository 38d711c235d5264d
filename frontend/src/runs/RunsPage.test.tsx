import { screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TrainingRun } from "../api/runs";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { lossSeries, nextSteps, progressText, runStatusText, runTimes, runTitle, thinnedNote, validationSeries, validationSummary } from "./runView";

afterEach(() => vi.unstubAllGlobals());

function makeRun(extra: Partial<TrainingRun> = {}): TrainingRun {
  return {
    id: 5,
    algorithm: "sft",
    status: "running",
    progress: 0.3,
    snapshot: null,
    config: { stages: [{ algorithm: "coldstart" }], deploy_as: "v0" },
    metrics: [
      { step: 0, total: 10, loss: 2.0, phase: "demos" },
      { step: 1, total: 10, loss: 1.5, phase: "demos" },
      { step: 0, total: 40, loss: 1.2, phase: "sft" },
      { step: 10, total: 40, loss: 0.8, phase: "sft" },
    ],
    warnings: [],
    error: "",
    log_tail: "",
    checkpoint: null,
    created_at: "2026-01-01T00:00:00Z",
    started_at: "2026-01-01T00:00:01Z",
    finished_at: null,
    queued_seconds: 1,
    training_seconds: 65,
    metrics_lines: 4,
    metrics_every: 1,
    ...extra,
  };
}

const base: Routes = {
  "GET /api/v1/auth/session": { body: { user: { id: 1, username: "mia", is_staff: false } } },
  "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "manager", created_at: "" } },
  "GET /api/v1/projects/": { body: { results: [], next: null } },
  "GET /api/v1/health": { body: { status: "ok", checks: {} } },
  "GET /api/v1/projects/1/deployments/": {
    body: {
      results: [
        { id: 1, checkpoint: { id: 1, name: "scripted-0" }, backend: "local", active: false, activated_at: null, deactivated_at: null, reason: "" },
        { id: 2, checkpoint: { id: 2, name: "v0-coldstart" }, backend: "local", active: true, activated_at: "2026-01-01T00:00:00Z", deactivated_at: null, reason: "cold start" },
      ],
      next: null,
    },
  },
};

describe("runView", () => {
  it("names a cold-start run for what it does and splits the loss by phase", () => {
    const run = makeRun();
    expect(runTitle(run)).toBe("Training the first policy (v0) from scripted demonstrations");
    expect(runTitle(makeRun({ config: {}, algorithm: "dpo", id: 9 }))).toBe("DPO run #9");
    expect(lossSeries(run)).toEqual([
      { name: "demos", points: [{ x: 0, y: 2 }, { x: 1, y: 1.5 }] },
      { name: "sft", points: [{ x: 0, y: 1.2 }, { x: 10, y: 0.8 }] },
    ]);
    expect(lossSeries(makeRun({ metrics: [{ step: 3, loss: 0.5 }, { step: 4 }] }))).toEqual([{ name: "sft", points: [{ x: 3, y: 0.5 }] }]);
  });

  it("says where a run is in words, not the trainer's phase names", () => {
    expect(progressText(makeRun({ metrics: [{ step: 440, total: 450, phase: "demos" }] }))).toBe(
      "Recording demonstrations: episode 440 of 450",
    );
    expect(progressText(makeRun())).toBe("Supervised fine-tuning: step 10 of 40");
    expect(progressText(makeRun({ metrics: [{ step: 1, total: 1, phase: "base" }] }))).toBe("Preparing the base model");
    expect(progressText(makeRun({ algorithm: "dpo", metrics: [{ step: 3 }] }))).toBe("Preference training (DPO): step 3");
    expect(progressText(makeRun({ metrics: [] }))).toBeNull();
  });

  it("adds the held-out rows' validation loss as its own curve and says which step's weights the run kept", () => {
    const run = makeRun({
      config: { cycle: 2 },
      metrics: [
        { step: 10, total: 60, loss: 1.0, val_loss: 0.9, phase: "sft" },
        { step: 20, total: 60, loss: 0.6, val_loss: 0.5, phase: "sft" },
        { step: 30, total: 60, loss: 0.3, val_loss: 0.7, phase: "sft" },
        { step: 10, total: 20, loss: 0.7, phase: "dpo" },
      ],
    });
    expect(lossSeries(run).map((s) => s.name)).toEqual(["sft", "dpo", "validation (held-out rows)"]);
    expect(validationSeries(run)?.points).toEqual([{ x: 10, y: 0.9 }, { x: 20, y: 0.5 }, { x: 30, y: 0.7 }]);
    expect(validationSummary(run)).toBe(
      "Validation loss 0.900 at step 10 → lowest 0.500 at step 20, 0.700 at step 30; the checkpoint keeps the weights of step 20",
    );
    expect(validationSeries(makeRun())).toBeNull();
    expect(validationSummary(makeRun())).toBeNull();
  });

  it("tells the time in the queue apart from the training time, and names the cold start's", () => {
    expect(runTimes(makeRun({ status: "queued", queued_seconds: 42, training_seconds: null }))).toBe("waiting in the queue for 42 s");
    expect(runTimes(makeRun({ config: {}, queued_seconds: 3, training_seconds: 125 }))).toBe("3 s in the queue · training for 2 min 5 s");
    expect(runTimes(makeRun({ config: {}, status: "succeeded", queued_seconds: 720, training_seconds: 4830 }))).toBe(
      "12 min in the queue · trained in 1 h 20 min",
    );
    expect(runTimes(makeRun({ status: "succeeded", queued_seconds: 0, training_seconds: 312 }))).toBe("0 s in the queue · the cold start took 5 min 12 s");
    expect(runTimes(makeRun({ status: "failed", queued_seconds: null, training_seconds: 30 }))).toBe("failed after 30 s");
    expect(runTimes(makeRun({ queued_seconds: null, training_seconds: null }))).toBeNull();
  });

  it("says when the loss chart keeps only every Nth progress line", () => {
    expect(thinnedNote(makeRun())).toBeNull();
    expect(thinnedNote(makeRun({ metrics_every: 4, metrics_lines: 1200 }))).toBe(
      "The chart keeps every 4th of the run's 1,200 progress lines (at most 3 left out between two points).",
    );
    expect(thinnedNote(makeRun({ metrics_every: 2, metrics_lines: 300 }))).toMatch(/every 2nd of the run's 300/);
  });

  it("suggests a next step that matches the failure", () => {
    expect(nextSteps(makeRun({ error: "RuntimeError: CUDA out of memory" }))).toMatch(/smaller batch/);
    expect(nextSteps(makeRun({ error: "trainer sft exited with 1: dataset is empty" }))).toMatch(/nothing to train on/);
    expect(nextSteps(makeRun({ error: "something odd" }))).toMatch(/Read the log/);
  });
});

describe("RunsPage", () => {
  it("shows the deployed checkpoint and a live run's progress and loss curves, polling until it ends", async () => {
    let calls = 0;
    mockFetch({
      ...base,
      "GET /api/v1/projects/1/runs/": () => {
        calls += 1;
        const run = calls === 1 ? makeRun() : makeRun({ status: "succeeded", progress: 1, checkpoint: { id: 3, name: "v0" } });
        return { body: { results: [run], next: null } };
      },
    });
    renderApp("/projects/1/runs");
    expect((await screen.findByTestId("active-checkpoint")).textContent).toBe("v0-coldstart");
    expect((await screen.findByTestId("run-title")).textContent).toBe("Training the first policy (v0) from scripted demonstrations");
    expect(screen.getByTestId("run-progress").getAttribute("aria-valuenow")).toBe("30");
    expect(screen.getByTestId("run-times").textContent).toBe("1 s in the queue · training for 1 min 5 s");
    expect(screen.queryByTestId("run-thinned")).toBeNull();
    const paths = document.querySelectorAll("path[data-series]");
    expect([...paths].map((p) => p.getAttribute("data-series"))).toEqual(["demos", "sft"]);

    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"), { timeout: 6000 });
    expect(screen.getByTestId("run-progress").getAttribute("aria-valuenow")).toBe("100");
    // Nothing is active any more: no further polls.
    await new Promise((r) => setTimeout(r, 2500));
    expect(calls).toBe(2);
  });

  it("draws a cycle run's validation curve beside the training loss and says where it was lowest", async () => {
    const run = makeRun({
      config: { cycle: 1 }, status: "succeeded", progress: 1,
      metrics: [
        { step: 10, total: 30, loss: 1.0, val_loss: 0.8, phase: "sft" },
        { step: 20, total: 30, loss: 0.5, val_loss: 0.4, phase: "sft" },
      ],
      metrics_every: 3, metrics_lines: 600,
    });
    mockFetch({ ...base, "GET /api/v1/projects/1/runs/": { body: { results: [run], next: null } } });
    renderApp("/projects/1/runs");
    expect((await screen.findByTestId("run-validation")).textContent).toBe("Validation loss 0.800 at step 10 → lowest 0.400 at step 20");
    expect(screen.getByTestId("run-times").textContent).toBe("1 s in the queue · trained in 1 min 5 s");
    expect(screen.getByTestId("run-thinned").textContent).toMatch(/^The chart keeps every 3rd of the run's 600 progress lines/);
    expect([...document.querySelectorAll("path[data-series]")].map((p) => p.getAttribute("data-series"))).toEqual([
      "sft",
      "validation (held-out rows)",
    ]);
  });

  it("shows a failed run's error, its log tail and what to do next", async () => {
    mockFetch({
      ...base,
      "GET /api/v1/projects/1/runs/": {
        body: {
          results: [makeRun({ status: "failed", config: {}, algorithm: "dpo", error: "trainer dpo exited with 1: no training rows", log_tail: "loading\nValueError: no training rows" })],
          next: null,
        },
      },
    });
    renderApp("/projects/1/runs");
    const failure = await screen.findByTestId("run-failure");
    expect(failure.textContent).toContain("trainer dpo exited with 1: no training rows");
    expect(screen.getByTestId("run-log").textContent).toContain("ValueError: no training rows");
    expect(screen.getByTestId("run-next-steps").textContent).toMatch(/nothing to train on/);
  });

  it("does not let a run that finished with warnings look like a plain success", async () => {
    const cut =
      "The time budget of 3600 s cut training at step 1147 of 2600: the model trained less than its recipe asks. Give it more time (or a faster machine) for the full result.";
    mockFetch({
      ...base,
      "GET /api/v1/projects/1/runs/": {
        body: {
          results: [
            makeRun({ id: 6, status: "succeeded", progress: 1, warnings: [cut], checkpoint: { id: 3, name: "v0" } }),
            makeRun({ id: 5, status: "succeeded", progress: 1, config: {}, checkpoint: { id: 2, name: "c1" } }),
          ],
          next: null,
        },
      },
    });
    renderApp("/projects/1/runs");
    const [warned, plain] = await screen.findAllByTestId("run");
    expect(within(warned).getByTestId("run-status").textContent).toBe("finished with a warning");
    expect(within(warned).getByTestId("run-status").className).toContain("status-warning");
    const banner = within(warned).getByTestId("run-warnings");
    expect(banner.textContent).toContain("Finished with a warning");
    expect(banner.textContent).toContain("cut training at step 1147 of 2600");
    expect(within(warned).getByTestId("run-progress").className).toContain("warn");
    expect(within(plain).getByTestId("run-status").textContent).toBe("succeeded");
    expect(within(plain).queryByTestId("run-warnings")).toBeNull();
  });
});

describe("runStatusText", () => {
  it("counts the warnings of a succeeded run, and leaves other statuses as they are", () => {
    expect(runStatusText(makeRun({ status: "succeeded", warnings: ["a", "b"] }))).toBe("finished with 2 warnings");
    expect(runStatusText(makeRun({ status: "succeeded", warnings: [] }))).toBe("succeeded");
    expect(runStatusText(makeRun({ status: "failed", warnings: ["a"] }))).toBe("failed");
  });
});
