import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Cycle, CycleSettings } from "../api/cycles";
import type { TrainingRun } from "../api/runs";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { failureAdvice, formatSeconds, stepStatus, successSeries, taskChangeText, taskComparison } from "./cycleView";

afterEach(() => vi.unstubAllGlobals());

const T0 = "2026-01-01T10:00:00Z";

function makeRun(extra: Partial<TrainingRun> = {}): TrainingRun {
  return {
    id: 7, algorithm: "sft", status: "running", progress: 0.4, config: { cycle: 3 }, snapshot: null,
    metrics: [{ step: 10, total: 100, loss: 2.1, phase: "sft" }, { step: 40, total: 100, loss: 0.9, phase: "sft" }],
    warnings: [], error: "", log_tail: "", checkpoint: null, created_at: T0, started_at: T0, finished_at: null,
    queued_seconds: 0, training_seconds: 40, metrics_lines: 2, metrics_every: 1, ...extra,
  };
}

function evaluation(id: number, name: string, role: "candidate" | "deployed", rate: number) {
  return {
    id, checkpoint: { id, name }, role, success_rate: rate, mean_reward: rate, episodes: 20,
    seeds: { "click-test": "100000-100009", "focus-text": "100000-100009" },
    per_task: { "click-test": { episodes: 10, success_rate: rate, mean_reward: rate, mean_steps: 1, void_rate: 0 } },
    eval_seconds: 12, created_at: T0, reused_from: null,
  };
}

function makeCycle(extra: Partial<Cycle> = {}): Cycle {
  return {
    id: 1, project: 1, iteration: 1, state: "deployed", trigger: "manual", triggered_by: { id: 2, username: "mia" }, config: {},
    decision: "promote: c1 40.0% vs deployed untrained 0.0% on the same 20 eval episodes; gain +40.0 points >= margin 5.0",
    decision_data: {}, awaiting_approval: false, error: "", log_tail: "",
    timings: {
      gate: { started: T0, finished: T0, seconds: 0.03 }, snapshot: { started: T0, finished: T0, seconds: 0.5 },
      train: { started: T0, finished: T0, seconds: 95 }, evaluate: { started: T0, finished: T0, seconds: 41 },
      decide: { started: T0, finished: T0, seconds: 0.1 },
    },
    progress: {}, candidate: { id: 11, name: "c1" }, baseline: { id: 10, name: "untrained" }, deployment: 2,
    snapshots: [{ id: 4, kind: "sft", rows: 31, status: "ready", sha256: "ab" }],
    run: makeRun({ status: "succeeded", progress: 1 }),
    evaluations: [evaluation(11, "c1", "candidate", 0.4), evaluation(10, "untrained", "deployed", 0)],
    started_at: T0, updated_at: T0, finished_at: "2026-01-01T10:02:20Z", ...extra,
  };
}

const rejected = makeCycle({
  id: 2, iteration: 2, state: "rejected", candidate: { id: 12, name: "c2" }, baseline: { id: 11, name: "c1" }, deployment: null,
  decision: "rejected: c2 35.0% vs deployed c1 40.0% on the same 20 eval episodes; gain -5.0 points, the margin is 5.0",
  decision_data: {
    decision: {
      text: "rejected", promote: false, margin: 0.05, gain: -0.05,
      candidate: { checkpoint: "c2", success_rate: 0.35, episodes: 20 }, deployed: { checkpoint: "c1", success_rate: 0.4, episodes: 20 },
    },
  },
  evaluations: [evaluation(12, "c2", "candidate", 0.35), evaluation(11, "c1", "deployed", 0.4)],
});

const running = makeCycle({
  id: 3, iteration: 3, state: "train", decision: "", candidate: null, deployment: null, finished_at: null, evaluations: [],
  timings: { gate: { started: T0, finished: T0, seconds: 0.02 }, snapshot: { started: T0, finished: T0, seconds: 0.4 }, train: { started: T0 } },
  progress: { label: "training run #7" }, run: makeRun(),
});

const settings: CycleSettings = {
  min_new_rows: 20, recipe: [{ algorithm: "sft", max_steps: 200, lr: 0.003 }], eval_tasks: [], eval_seeds: 10, eval_max_steps: 0,
  margin: 0.05, auto_deploy: true, backend: "local", export: "lora", base_checkpoint: null, history_images: 0, cadence_minutes: 60,
  replay_ratio: 2, replay_max_rows: 600, correction_weight: 3, val_fraction: 0.15, val_min_rows: 2, val_from: "corrected", patience: 3,
  schedule: "every 60 minutes", last_scheduled_at: null,
  gate: { buckets: { sft: { rows: 40, new_rows: 12 } }, new_rows: 12, min_new_rows: 20 },
  eval_plan: [{ env: "miniwob", seeds: "100000-100009", max_steps: 3, tasks: ["click-test", "focus-text"] }], eval_plan_error: "",
  eval_task_choices: [{ id: 5, task_name: "click-test", seed_start: 100000, seed_end: 100099 }],
};

function routes(role: string, cycles: Cycle[], extra: Routes = {}): Routes {
  return {
    "GET /api/v1/auth/session": { body: { user: { id: 2, username: "mia", is_staff: false } } },
    "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role, created_at: "" } },
    "GET /api/v1/projects/": { body: { results: [], next: null } },
    "GET /api/v1/health": { body: { status: "ok", checks: {} } },
    "GET /api/v1/projects/1/cycles/": { body: { results: cycles, next: null } },
    "GET /api/v1/projects/1/cycle-settings": { body: settings },
    "GET /api/v1/projects/1/deployments/": {
      body: {
        results: [
          { id: 2, checkpoint: { id: 11, name: "c1" }, backend: "local", active: true, activated_at: T0, deactivated_at: null, reason: "cycle 1: auto-deployed" },
          { id: 1, checkpoint: { id: 10, name: "untrained" }, backend: "local", active: false, activated_at: T0, deactivated_at: T0, reason: "test" },
        ],
        next: null,
      },
    },
    ...extra,
  };
}

describe("cycleView", () => {
  it("reads steps, durations and the success series across iterations", () => {
    expect(stepStatus(running, "snapshot")).toBe("done");
    expect(stepStatus(running, "train")).toBe("current");
    expect(stepStatus(running, "evaluate")).toBe("pending");
    const failed = makeCycle({ state: "failed", timings: { gate: { started: T0, finished: T0, seconds: 0 }, train: { started: T0 } } });
    expect(stepStatus(failed, "train")).toBe("failed");
    expect(formatSeconds(95)).toBe("1 min 35 s");
    expect(formatSeconds(0.4)).toBe("0.4 s");
    expect(successSeries([rejected, makeCycle()]).map((s) => [s.name, s.points])).toEqual([
      ["candidate", [{ x: 1, y: 40 }, { x: 2, y: 35 }]],
      ["deployed (same cycle, same seeds)", [{ x: 1, y: 0 }, { x: 2, y: 40 }]],
    ]);
  });

  it("says what to do after a failure, by the step that failed", () => {
    const refused = makeCycle({ state: "failed", error: "The deployment was refused: The weights in /x are corrupt", timings: {} });
    expect(failureAdvice(refused)).toMatch(/missing or corrupt.*unchanged/);
    const oom = makeCycle({
      state: "failed", error: "The training run #7 failed", timings: { train: { started: T0 } },
      run: makeRun({ status: "failed", error: "trainer sft exited with -9: Killed" }),
    });
    expect(failureAdvice(oom)).toMatch(/ran out of memory/);
  });
});

function perTask(rates: Record<string, number>) {
  return Object.fromEntries(Object.entries(rates).map(([t, r]) => [t, { episodes: 20, success_rate: r, mean_reward: r, mean_steps: 1, void_rate: 0 }]));
}

/** A candidate that learnt a new task and forgot an old one: lost overall, and the card says where. */
const forgot = makeCycle({
  id: 8, iteration: 5, state: "rejected", candidate: { id: 15, name: "c5" }, baseline: { id: 14, name: "c4" }, deployment: null,
  decision: "rejected: c5 60.0% vs deployed c4 63.3% on the same 60 eval episodes; gain -3.3 points, the margin is 5.0",
  evaluations: [
    { ...evaluation(15, "c5", "candidate", 0.6), episodes: 60, per_task: perTask({ "click-dialog": 0.9, "click-link": 0.3, "focus-text": 0.6 }) },
    {
      ...evaluation(14, "c4", "deployed", 0.633), episodes: 60, per_task: perTask({ "click-dialog": 0.5, "click-link": 0.8, "focus-text": 0.6 }),
      eval_seconds: 0, reused_from: { cycle: 4, evaluation: 13, eval_seconds: 50 },
    },
  ],
});

describe("per-task comparison", () => {
  it("sets the candidate against the deployed checkpoint task by task and says where it lost", () => {
    expect(taskComparison(forgot)).toEqual([
      { task: "click-dialog", candidate: 0.9, deployed: 0.5, points: 40, episodes: 20 },
      { task: "click-link", candidate: 0.3, deployed: 0.8, points: -50, episodes: 20 },
      { task: "focus-text", candidate: 0.6, deployed: 0.6, points: 0, episodes: 20 },
    ]);
    expect(taskChangeText(forgot)).toBe("Worse than c4 on click-link (30.0% vs 80.0%, −50.0 points); better on click-dialog (+40.0 points).");
    expect(taskChangeText(makeCycle())).toBe("Better than untrained on click-test (+40.0 points).");
    expect(taskChangeText(makeCycle({ evaluations: [evaluation(11, "c1", "candidate", 0.4)] }))).toBeNull();
    expect(taskComparison(running)).toEqual([]);
  });
});

describe("CyclesPage", () => {
  it("shows per task where a rejected candidate lost, and a deployed measurement an earlier cycle made", async () => {
    mockFetch(routes("manager", [forgot]));
    renderApp("/projects/1/cycles");
    const [card] = await screen.findAllByTestId("cycle");
    expect(within(card).getByTestId("task-change").textContent).toBe(
      "Worse than c4 on click-link (30.0% vs 80.0%, −50.0 points); better on click-dialog (+40.0 points).",
    );
    expect(within(card).getByTestId("task-change-click-link").textContent).toBe("−50.0");
    expect(within(card).getByTestId("task-change-click-link").className).toContain("warn-text");
    expect(within(card).getByTestId("task-change-click-dialog").textContent).toBe("+40.0");
    expect(within(card).getByTestId("task-change-focus-text").textContent).toBe("±0.0");
    const deployedRow = within(card).getAllByTestId("evaluation-row").find((r) => r.getAttribute("data-role") === "deployed")!;
    expect(deployedRow.textContent).toContain("measured on these seeds in cycle 4");
  });


  it("shows the running cycle's steps and live training, the chart, evaluations and why a candidate was rejected", async () => {
    mockFetch(routes("manager", [running, rejected, makeCycle()]));
    renderApp("/projects/1/cycles");
    const cycles = await screen.findAllByTestId("cycle");
    expect(cycles.map((c) => c.getAttribute("data-state"))).toEqual(["train", "rejected", "deployed"]);
    const live = cycles[0];
    expect(within(live).getByTestId("step-train").getAttribute("data-status")).toBe("current");
    expect(within(live).getByTestId("step-snapshot").textContent).toContain("0.4 s");
    expect(within(live).getByTestId("run-progress").getAttribute("aria-valuenow")).toBe("40");
    expect(live.querySelectorAll("path[data-series]").length).toBe(1); // the loss curve
    expect((screen.getByTestId("run-cycle") as HTMLButtonElement).disabled).toBe(true);

    const series = [...document.querySelectorAll(".success-card path[data-series]")].map((p) => p.getAttribute("data-series"));
    expect(series).toEqual(["candidate", "deployed (same cycle, same seeds)"]);
    expect(screen.getAllByTestId("success-row").map((r) => r.textContent)).toEqual([
      expect.stringContaining("1c140.0%untrained0.0%deployed"),
      expect.stringContaining("2c235.0%c140.0%rejected"),
    ]);
    fireEvent.click(within(cycles[1]).getByRole("button", { name: "Details" }));
    const why = within(cycles[1]).getByTestId("cycle-decision");
    expect(why.textContent).toContain("Why it was rejected");
    expect(why.textContent).toContain("Candidate c2: 35.0% · deployed c1: 40.0% · required gain 5.0 points");
    expect(within(cycles[1]).getAllByTestId("evaluation-row").map((r) => r.getAttribute("data-role"))).toEqual(["candidate", "deployed"]);
    expect(screen.getByTestId("cycles-active-checkpoint").textContent).toBe("c1");
    expect(screen.getByTestId("cycle-gate-now").textContent).toContain("12 new routed rows");
  });

  it("runs a cycle now, and says why when the server refuses", async () => {
    const { requests } = mockFetch(routes("manager", [makeCycle()], {
      "POST /api/v1/projects/1/cycles/": { status: 409, body: { detail: "Cycle 4 is still in state 'train'; a project runs one cycle at a time. Wait for it to end." } },
    }));
    renderApp("/projects/1/cycles");
    fireEvent.click(await screen.findByTestId("run-cycle"));
    expect((await screen.findByRole("alert")).textContent).toContain("one cycle at a time");
    expect(requests.filter((r) => r.method === "POST").map((r) => r.url)).toEqual(["/api/v1/projects/1/cycles/"]);
  });

  it("approves a rejected candidate by hand and rolls back to an earlier deployment", async () => {
    const { requests } = mockFetch(routes("manager", [rejected], {
      "POST /api/v1/cycles/2/approve": { body: { ...rejected, state: "deployed" } },
      "POST /api/v1/projects/1/deployments/1/rollback": {
        body: { id: 3, checkpoint: { id: 10, name: "untrained" }, backend: "local", active: true, activated_at: T0, deactivated_at: null, reason: "rollback" },
      },
    }));
    renderApp("/projects/1/cycles");
    fireEvent.click(await screen.findByTestId("approve-candidate"));
    fireEvent.click(screen.getByTestId("approve-anyway-deploy"));
    await waitFor(() => expect(requests.some((r) => r.method === "POST" && r.url === "/api/v1/cycles/2/approve")).toBe(true));
    fireEvent.click(screen.getByTestId("rollback"));
    fireEvent.click(screen.getByTestId("rollback-confirm"));
    expect((await screen.findByTestId("rollback-done")).textContent).toContain("untrained serves new episodes now");
  });

  it("saves the settings (margin in points) and shows the server's field errors", async () => {
    let saved: unknown = null;
    const { requests } = mockFetch(routes("manager", [], {
      "PATCH /api/v1/projects/1/cycle-settings": (init) => {
        saved = JSON.parse(String(init.body));
        return (saved as { min_new_rows: number }).min_new_rows === 0
          ? { status: 400, body: { detail: "min_new_rows: use a whole number from 1.", errors: { min_new_rows: ["use a whole number from 1."] } } }
          : { body: settings };
      },
    }));
    renderApp("/projects/1/cycles");
    fireEvent.change(await screen.findByTestId("setting-margin"), { target: { value: "10" } });
    fireEvent.change(screen.getByTestId("stage-sft-steps"), { target: { value: "150" } });
    fireEvent.click(screen.getByTestId("cycle-settings-save"));
    await screen.findByTestId("cycle-settings-saved");
    expect(saved).toMatchObject({ margin: 0.1, cadence_minutes: 60, recipe: [{ algorithm: "sft", max_steps: 150, lr: 0.003 }] });

    fireEvent.change(screen.getByTestId("setting-min-rows"), { target: { value: "0" } });
    fireEvent.click(screen.getByTestId("cycle-settings-save"));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("The settings were not saved");
    // the server's message once, beside its field; the banner by the button says where to look
    const minRows = screen.getByTestId("setting-min-rows").closest(".field") as HTMLElement;
    expect(minRows.querySelector(".field-error")?.textContent).toBe("use a whole number from 1.");
    expect(document.body.textContent?.split("use a whole number from 1.").length).toBe(2);
    expect(alert.textContent).toContain("the message beside the field says what to change");
    fireEvent.change(screen.getByTestId("setting-margin"), { target: { value: "abc" } });
    const margin = screen.getByTestId("setting-margin").closest(".field") as HTMLElement;
    expect(margin.querySelector(".field-error")?.textContent).toContain("points of success rate");
    expect(screen.getByTestId("setting-margin").getAttribute("aria-invalid")).toBe("true");
    fireEvent.change(screen.getByTestId("setting-min-rows"), { target: { value: "5" } });
    expect(minRows.querySelector(".field-error")).toBeNull(); // changed: the server's message about 0 goes
    expect(screen.queryByRole("alert")).toBeNull();
    expect(requests.filter((r) => r.method === "PATCH").length).toBe(2);
  });

  it("saves the training-data knobs with their help, and refuses out-of-range ones before sending", async () => {
    let saved: Record<string, unknown> | null = null;
    const { requests } = mockFetch(routes("manager", [], {
      "PATCH /api/v1/projects/1/cycle-settings": (init) => {
        saved = JSON.parse(String(init.body));
        return { body: settings };
      },
    }));
    renderApp("/projects/1/cycles");
    const knobs = await screen.findByTestId("cycle-data-settings");
    expect(knobs.textContent).toContain("2 replayed rows a new one, corrected steps ×3, validation on held-out corrections");
    expect(knobs.textContent).toContain("rises when it forgets");
    fireEvent.change(screen.getByTestId("setting-replay_ratio"), { target: { value: "1.5" } });
    fireEvent.change(screen.getByTestId("setting-val_from"), { target: { value: "new" } });
    expect(knobs.textContent).toContain("mostly measures forgetting");
    fireEvent.click(screen.getByTestId("cycle-settings-save"));
    await screen.findByTestId("cycle-settings-saved");
    expect(saved).toMatchObject({ replay_ratio: 1.5, val_from: "new", correction_weight: 3, val_fraction: 0.15, patience: 3 });

    fireEvent.change(screen.getByTestId("setting-val_fraction"), { target: { value: "0.9" } });
    const valFraction = screen.getByTestId("field-val_fraction");
    expect(valFraction.querySelector(".field-error")?.textContent).toBe("Use a number from 0 to 0.5.");
    fireEvent.change(screen.getByTestId("setting-val_fraction"), { target: { value: "0" } });
    expect(valFraction.querySelector(".field-error")).toBeNull(); // fixed: gone at once
    expect(screen.getByTestId("field-patience").textContent).toContain("Stopping early reads the validation loss");
    fireEvent.click(screen.getByTestId("cycle-settings-save"));
    expect(requests.filter((r) => r.method === "PATCH").length).toBe(1);
  });

  it("shows a failed cycle's log tail and what to do next", async () => {
    const failed = makeCycle({
      state: "failed", decision: "failed in evaluate; the deployment is unchanged",
      error: "trainer eval of c1 exited with 2: error: --init is not a checkpoint dir",
      log_tail: "$ trainer eval --init /gone\nerror: --init '/gone' is not a checkpoint dir",
      timings: { gate: { started: T0, finished: T0, seconds: 0 }, evaluate: { started: T0 } }, evaluations: [],
    });
    mockFetch(routes("manager", [failed]));
    renderApp("/projects/1/cycles");
    expect((await screen.findByTestId("cycle-failure")).textContent).toContain("exited with 2");
    expect(screen.getByTestId("cycle-log").textContent).toContain("is not a checkpoint dir");
    expect(screen.getByTestId("cycle-next-steps").textContent).toMatch(/evaluation could not run.*unchanged/);
    expect(screen.getByTestId("step-evaluate").getAttribute("data-status")).toBe("failed");
  });

  it("lets annotators look but not act", async () => {
    mockFetch(routes("annotator", [rejected]));
    renderApp("/projects/1/cycles");
    await screen.findAllByTestId("cycle");
    expect(screen.queryByTestId("run-cycle")).toBeNull();
    expect(screen.queryByTestId("approve-candidate")).toBeNull();
    expect(screen.queryByTestId("rollback")).toBeNull();
    expect((await screen.findByTestId("setting-margin")).closest("fieldset")?.disabled).toBe(true);
  });

  it("asks before deploying a candidate the gate rejected: a quiet button, the numbers, Cancel focused", async () => {
    const zero = makeCycle({
      ...rejected,
      decision: "rejected: c2 0.0% vs deployed c1 40.0% on the same 20 eval episodes; gain -40.0 points, the margin is 5.0",
      decision_data: {
        decision: {
          text: "rejected", promote: false, margin: 0.05, gain: -0.4,
          candidate: { checkpoint: "c2", success_rate: 0, episodes: 20 }, deployed: { checkpoint: "c1", success_rate: 0.4, episodes: 20 },
        },
      },
    });
    const { requests } = mockFetch(routes("manager", [zero], { "POST /api/v1/cycles/2/approve": { body: { ...zero, state: "deployed" } } }));
    const approvals = () => requests.filter((r) => r.method === "POST" && r.url === "/api/v1/cycles/2/approve").length;
    renderApp("/projects/1/cycles");
    const anyway = (await screen.findByTestId("approve-candidate")) as HTMLButtonElement;
    expect(anyway.textContent).toBe("Approve candidate anyway…");
    expect(anyway.className).not.toContain("primary");

    fireEvent.click(anyway);
    const confirm = screen.getByTestId("approve-anyway-confirm");
    expect(confirm.getAttribute("role")).toBe("alertdialog");
    expect(confirm.textContent).toContain("Deploy c2 although the gate rejected it?");
    expect(screen.getByTestId("approve-anyway-numbers").textContent).toBe(
      "Candidate c2 succeeded in 0.0%, the deployed c1 in 40.0% on the same 20 eval episodes (same seeds).",
    );
    expect(screen.getByTestId("approve-anyway-reason").textContent).toContain("gain -40.0 points, the margin is 5.0");
    expect(document.activeElement).toBe(screen.getByTestId("approve-anyway-cancel"));
    expect(approvals()).toBe(0);

    fireEvent.click(screen.getByTestId("approve-anyway-cancel"));
    expect(screen.queryByTestId("approve-anyway-confirm")).toBeNull();
    fireEvent.click(screen.getByTestId("approve-candidate"));
    fireEvent.keyDown(screen.getByTestId("approve-anyway-cancel"), { key: "Escape" });
    expect(screen.queryByTestId("approve-anyway-confirm")).toBeNull();
    expect(approvals()).toBe(0);

    fireEvent.click(screen.getByTestId("approve-candidate"));
    fireEvent.click(screen.getByTestId("approve-anyway-deploy"));
    await waitFor(() => expect(approvals()).toBe(1));
  });

  it("approves a candidate that passed the gate and awaits a manager with one primary click", async () => {
    const awaiting = makeCycle({
      id: 4, iteration: 4, state: "decide", awaiting_approval: true, finished_at: null, deployment: null,
      candidate: { id: 13, name: "c3" }, decision: "promote: c3 60.0% vs deployed c1 40.0%; awaiting a manager's approval",
    });
    const { requests } = mockFetch(routes("manager", [awaiting], { "POST /api/v1/cycles/4/approve": { body: { ...awaiting, state: "deployed", awaiting_approval: false } } }));
    renderApp("/projects/1/cycles");
    const approve = (await screen.findByTestId("approve-candidate")) as HTMLButtonElement;
    expect(approve.textContent).toBe("Approve candidate");
    expect(approve.className).toContain("primary");
    fireEvent.click(approve);
    expect(screen.queryByTestId("approve-anyway-confirm")).toBeNull();
    await waitFor(() => expect(requests.some((r) => r.method === "POST" && r.url === "/api/v1/cycles/4/approve")).toBe(true));
  });

  it("shows the training's warnings on the cycle's card, folded or not", async () => {
    const memorised =
      "Trained 5 steps, not 200: that is 5 passes over the 3 rows, and more would only memorise them. Collect more data for a longer training.";
    const warned = makeCycle({ ...rejected, run: makeRun({ status: "succeeded", progress: 1, warnings: [memorised] }) });
    mockFetch(routes("manager", [makeCycle({ id: 5, iteration: 3 }), warned]));
    renderApp("/projects/1/cycles");
    const cards = await screen.findAllByTestId("cycle");
    expect(within(cards[0]).queryByTestId("cycle-run-warning")).toBeNull();
    const card = cards[1];
    expect(within(card).getByTestId("cycle-run-warning").textContent).toBe("training warning");
    expect(within(card).getByTestId("cycle-run-warning-line").textContent).toContain("Training finished with a warning: Trained 5 steps, not 200");
    fireEvent.click(within(card).getByRole("button", { name: "Details" }));
    expect(within(card).getByTestId("run-status").textContent).toBe("finished with a warning");
    expect(within(card).getByTestId("run-warnings").textContent).toContain("5 passes over the 3 rows");
  });

  it("says what each stage trained on: new, held-out and replayed rows, kept pairs, stages the gate dropped", async () => {
    const mixed = makeCycle({
      id: 6, iteration: 4,
      decision_data: {
        gate: { stages: { sft: { ok: true }, dpo: { ok: false, why: "dpo: none of its 3 new pairs changes the action" } } },
        data: {
          sft: { snapshot_rows: 30, val_rows: 4, train_snapshot_rows: 26, replay_rows: 52, replay_other_rendering: 5, corrected_rows: 6, correction_weight: 3 },
        },
      } as unknown as Cycle["decision_data"],
    });
    mockFetch(routes("manager", [mixed]));
    renderApp("/projects/1/cycles");
    const [card] = await screen.findAllByTestId("cycle"); // the newest cycle shows its details unasked
    const lines = within(card).getByTestId("cycle-training-data").querySelectorAll("li");
    expect([...lines].map((li) => li.textContent)).toEqual([
      "SFT: 26 snapshot rows + 52 replayed from the deployed checkpoint's training data (6 corrected steps counted 3 times); 4 snapshot rows held out for the validation loss; 5 replay rows of another prompt style left out",
      "DPO stage dropped at the gate: dpo: none of its 3 new pairs changes the action",
    ]);
  });

  it("sets each stage's max epochs (0: no cap), explains it, and asks none of RL", async () => {
    let saved: unknown = null;
    mockFetch(routes("manager", [], {
      "GET /api/v1/projects/1/cycle-settings": {
        body: { ...settings, recipe: [{ algorithm: "sft", max_steps: 200, lr: 0.003, max_epochs: 5 }, { algorithm: "rl", max_steps: 20 }] },
      },
      "PATCH /api/v1/projects/1/cycle-settings": (init) => {
        saved = JSON.parse(String(init.body));
        return { body: settings };
      },
    }));
    renderApp("/projects/1/cycles");
    const epochs = (await screen.findByTestId("stage-sft-epochs")) as HTMLInputElement;
    expect(epochs.value).toBe("5");
    expect((screen.getByTestId("stage-dpo-epochs") as HTMLInputElement).value).toBe("5"); // the default, off until ticked
    expect(screen.queryByTestId("stage-rl-epochs")).toBeNull();
    expect(screen.getByTestId("recipe-epochs-help").textContent).toContain(
      "the stage stops after this many passes over its rows, whatever max steps says: a few rows trained for hundreds of steps are memorised",
    );

    fireEvent.change(epochs, { target: { value: "1001" } });
    expect(screen.getByTestId("problem-stage_sft").textContent).toContain("Max epochs is a whole number from 0 to 1000");
    expect(screen.getByTestId("cycle-settings-problems").textContent).toBe("One field above says what to fix before saving.");
    expect((screen.getByTestId("cycle-settings-save") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(epochs, { target: { value: "0" } });
    fireEvent.click(screen.getByTestId("cycle-settings-save"));
    await screen.findByTestId("cycle-settings-saved");
    expect(saved).toMatchObject({
      recipe: [
        { algorithm: "sft", max_steps: 200, max_epochs: 0, lr: 0.003 },
        { algorithm: "rl", max_steps: 20 },
      ],
    });
    expect((saved as { recipe: Record<string, unknown>[] }).recipe[1]).not.toHaveProperty("max_epochs");
  });
});
