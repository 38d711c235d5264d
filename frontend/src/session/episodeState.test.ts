// @vitest-environment node
import { describe, expect, it } from "vitest";
import { makeEpisode, makeStep } from "../test/factories";
import { applyMessage, commandSent, fromDetail, type LiveEpisode, noticeDismissed } from "./episodeState";

const proposed = (index: number, extra: Record<string, unknown> = {}) => ({
  type: "step.proposed",
  seq: 100 + index,
  data: {
    index,
    thought: "the button",
    action: { name: "click", args: { x: 1, y: 2 } },
    action_text: "click(x=1, y=2)",
    raw: "Thought: the button\nAction: click(x=1, y=2)",
    void_reason: null,
    width: 160,
    height: 210,
    url: "file:///x.html",
    reason: "",
    screenshot_url: `/api/v1/episodes/42/proposals/${index}/screenshot`,
    ...extra,
  },
});

describe("applyMessage", () => {
  it("stores a step once even when it arrives both over REST and in the replay", () => {
    let state = fromDetail(makeEpisode([makeStep(0), makeStep(1)]));
    state = applyMessage(state, { type: "step.executed", seq: 3, data: { ...makeStep(1), thought: "replayed" } });
    state = applyMessage(state, { type: "step.executed", seq: 4, data: makeStep(2) });
    expect(state.steps.map((s) => s.index)).toEqual([0, 1, 2]);
    expect(state.steps[1].thought).toBe("replayed");
    expect(state.episode?.n_steps).toBe(3);
  });

  it("holds a proposal until its step executes, and tracks control and status", () => {
    let state = fromDetail(makeEpisode());
    state = applyMessage(state, proposed(0));
    expect(state.proposal).toMatchObject({ index: 0, action_text: "click(x=1, y=2)", width: 160, void_reason: "" });
    expect(state.proposal?.screenshot_url).toBe("/api/v1/episodes/42/proposals/0/screenshot");
    state = applyMessage(state, { type: "episode.state", seq: 2, data: { status: "paused", control: { username: "ann" }, pending_index: 0 } });
    expect(state.episode?.status).toBe("paused");
    expect(state.control).toEqual({ username: "ann" });
    expect(state.proposal).not.toBeNull();
    state = applyMessage(state, { type: "step.executed", seq: 3, data: makeStep(0) });
    expect(state.proposal).toBeNull();
    state = applyMessage(state, { type: "control.changed", seq: 4, data: { control: null, human_control: true } });
    expect(state.control).toBeNull();
    expect(state.humanControl).toBe(true);
    state = applyMessage(state, { type: "episode.finished", seq: 5, data: { status: "finished", outcome: "success", reward: 1, end_reason: "finish command" } });
    expect(state.episode).toMatchObject({ status: "finished", outcome: "success", reward: 1, end_reason: "finish command" });
    expect(state.humanControl).toBe(false);
  });

  it("keeps a failed episode failed when it ends", () => {
    const state = applyMessage(fromDetail(makeEpisode()), { type: "episode.finished", seq: 1, data: { status: "failed", end_reason: "browser crashed" } });
    expect(state.episode?.status).toBe("failed");
  });

  it("closes the proposal when the episode says nothing is pending, and replaces it on a re-proposal", () => {
    let state = applyMessage(fromDetail(makeEpisode()), proposed(3));
    state = applyMessage(state, proposed(3, { action_text: "wait()", action: { name: "wait", args: {} } }));
    expect(state.proposal?.action_text).toBe("wait()");
    state = applyMessage(state, { type: "episode.state", seq: 9, data: { status: "running", pending_index: null } });
    expect(state.proposal).toBeNull();
  });

  it("learns who it is from hello and who watches from presence", () => {
    let state = applyMessage(fromDetail(makeEpisode()), { type: "hello", data: { server_time: 1, role: "manager", username: "mia", after: 0 } });
    expect(state.me).toEqual({ username: "mia", role: "manager" });
    state = applyMessage(state, { type: "presence", data: { watchers: ["ann", "mia"] } });
    expect(state.watchers).toEqual(["ann", "mia"]);
  });

  it("clears a pending command on its ack, and on the error that refuses it", () => {
    let state: LiveEpisode = fromDetail(makeEpisode());
    state = commandSent(state, { id: "c1", type: "approve" });
    state = commandSent(state, { id: "c2", type: "pause" });
    state = applyMessage(state, { type: "ack", id: "c1", status: "accepted", command: "approve", duplicate: false });
    expect(state.pending).toEqual([{ id: "c2", type: "pause" }]);
    state = applyMessage(state, { type: "error", id: "c2", data: { message: "The episode is already paused." } });
    expect(state.pending).toEqual([]);
    expect(state.notices).toEqual([{ key: 1, title: "The server refused that", message: "The episode is already paused." }]);
  });

  it("shows a worker's refusal of anyone's command, naming whose", () => {
    let state = applyMessage(fromDetail(makeEpisode()), { type: "hello", data: { role: "annotator", username: "ann" } });
    state = applyMessage(state, { type: "error", seq: 7, data: { message: "Take over first: the model is acting.", command: "x", username: "bob" } });
    state = applyMessage(state, { type: "error", seq: 8, data: { message: "Proposal 2 is no longer open.", command: "y", username: "ann" } });
    expect(state.notices.map((n) => [n.title, n.message])).toEqual([
      ["bob's command was refused", "Take over first: the model is acting."],
      ["Your command was refused", "Proposal 2 is no longer open."],
    ]);
    state = noticeDismissed(state, state.notices[0].key);
    expect(state.notices).toHaveLength(1);
  });

  it("ignores unknown types", () => {
    const state = fromDetail(makeEpisode());
    expect(applyMessage(state, { type: "something.new", seq: 2, data: {} })).toBe(state);
  });
});
