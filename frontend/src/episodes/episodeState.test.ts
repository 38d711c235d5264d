// @vitest-environment node
import { describe, expect, it } from "vitest";
import { makeEpisode, makeStep } from "../test/factories";
import { applyMessage, fromDetail } from "./episodeState";

describe("applyMessage", () => {
  it("stores a step once even when it arrives both over REST and in the replay", () => {
    let state = fromDetail(makeEpisode([makeStep(0), makeStep(1)]));
    state = applyMessage(state, { type: "step.executed", seq: 3, data: { ...makeStep(1), thought: "replayed" } });
    state = applyMessage(state, { type: "step.executed", seq: 4, data: makeStep(2) });
    expect(state.steps.map((s) => s.index)).toEqual([0, 1, 2]);
    expect(state.steps[1].thought).toBe("replayed");
    expect(state.episode?.n_steps).toBe(3);
  });

  it("holds a proposal until the step executes, and tracks control and status", () => {
    let state = fromDetail(makeEpisode());
    state = applyMessage(state, {
      type: "step.proposed",
      seq: 1,
      data: { index: 0, thought: "the button", action: { name: "click", args: { x: 1, y: 2 } }, action_text: "click(x=1, y=2)" },
    });
    expect(state.proposal?.action_text).toBe("click(x=1, y=2)");
    state = applyMessage(state, { type: "episode.state", seq: 2, data: { status: "paused", control: { username: "ann" } } });
    expect(state.episode?.status).toBe("paused");
    expect(state.control).toEqual({ username: "ann" });
    state = applyMessage(state, { type: "step.executed", seq: 3, data: makeStep(0) });
    expect(state.proposal).toBeNull();
    state = applyMessage(state, { type: "control.changed", seq: 4, data: { control: null } });
    expect(state.control).toBeNull();
    state = applyMessage(state, { type: "episode.finished", seq: 5, data: { outcome: "success", reward: 1 } });
    expect(state.episode).toMatchObject({ status: "finished", outcome: "success", reward: 1 });
  });

  it("keeps the server's error message and ignores unknown types", () => {
    let state = fromDetail(makeEpisode());
    state = applyMessage(state, { type: "error", seq: 1, data: { message: "Browser crashed." } });
    expect(state.serverError).toBe("Browser crashed.");
    expect(applyMessage(state, { type: "something.new", seq: 2, data: {} })).toBe(state);
  });
});
