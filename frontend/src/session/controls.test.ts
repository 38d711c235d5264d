// @vitest-environment node
import { describe, expect, it } from "vitest";
import { makeEpisode, makeStep } from "../test/factories";
import { controlsFor } from "./controls";
import { applyMessage, commandSent, fromDetail, type LiveEpisode } from "./episodeState";

const ann = { username: "ann", role: "annotator" as const };
const mia = { username: "mia", role: "manager" as const };

function withProposal(state: LiveEpisode, voidReason = ""): LiveEpisode {
  return applyMessage(state, {
    type: "step.proposed",
    seq: 50,
    data: { index: 2, thought: "t", action: voidReason ? null : { name: "wait", args: {} }, action_text: voidReason ? "" : "wait()", void_reason: voidReason },
  });
}

const controlled = (by: string | null, extra: Record<string, unknown> = {}) =>
  applyMessage(fromDetail(makeEpisode()), { type: "control.changed", seq: 1, data: { control: by ? { username: by } : null, human_control: false, ...extra } });

describe("controlsFor", () => {
  it("lets the controller decide an open proposal, and nobody decide when none is open", () => {
    const none = controlsFor(controlled("ann"), ann);
    expect(none.approve).toEqual({ enabled: false, why: "Nothing is proposed right now; wait for the next proposal." });
    const open = controlsFor(withProposal(controlled("ann")), ann);
    expect([open.approve.enabled, open.edit.enabled, open.reject.enabled]).toEqual([true, true, true]);
    expect(open.release.enabled).toBe(true);
    expect(open.claim.enabled).toBe(false);
  });

  it("refuses to approve a void turn but allows editing or rejecting it", () => {
    const c = controlsFor(withProposal(controlled("ann"), "no 'Action:' line found"), ann);
    expect(c.approve.why).toBe(
      "The model's answer could not be read as an action, so it cannot be approved: edit it (E) or reject it (R).",
    );
    expect(c.edit.enabled && c.reject.enabled).toBe(true);
  });

  it("says why nothing can be decided: an autonomous agent acting on its own, or a void turn just recorded", () => {
    const autonomous = applyMessage(controlled("ann"), { type: "episode.state", seq: 2, data: { mode: "autonomous", status: "running" } });
    expect(controlsFor(autonomous, ann).approve.why).toBe(
      "The agent acts on its own in this episode; pause it (Space) to decide its next step yourself.",
    );
    const afterVoid = applyMessage(controlled("ann"), { type: "step.executed", seq: 2, data: makeStep(1, { void: true, action: null, action_text: "" }) });
    expect(controlsFor(afterVoid, ann).approve.why).toMatch(/^The model's last answer could not be read as an action/);
  });

  it("makes a watcher read who controls, and lets only a manager claim from them", () => {
    const state = withProposal(controlled("bob"));
    const annSees = controlsFor(state, ann);
    expect(annSees.approve.enabled).toBe(false);
    expect(annSees.approve.why).toBe(
      "bob controls this episode; you are watching. Ask them to release it if you need to act; only a manager can take it from them.",
    );
    expect(annSees.claim.enabled).toBe(false);
    expect(annSees.claim.why).toMatch(/only a manager/);
    const miaSees = controlsFor(state, mia);
    expect(miaSees.claim.enabled).toBe(true);
    expect(miaSees.pause.enabled).toBe(false);
    expect(miaSees.pause.why).toBe("bob controls this episode; you are watching. Press C to claim control.");
  });

  it("lets anyone command an episode nobody controls (the first command makes them controller)", () => {
    const c = controlsFor(controlled(null), ann);
    expect([c.pause.enabled, c.takeover.enabled, c.claim.enabled, c.release.enabled]).toEqual([true, true, true, false]);
  });

  it("switches pause/resume and takeover/handback with the episode's state", () => {
    let state = controlled("ann", { human_control: true });
    state = applyMessage(state, { type: "episode.state", seq: 2, data: { status: "paused" } });
    const c = controlsFor(withProposal(state), ann);
    expect([c.pause.enabled, c.resume.enabled, c.takeover.enabled, c.handback.enabled, c.act.enabled]).toEqual([false, true, false, true, true]);
    expect(c.approve.why).toMatch(/You have taken over/);
  });

  it("disables a command while it waits for its ack, and everything once the episode ended", () => {
    const sent = commandSent(withProposal(controlled("ann")), { id: "1", type: "approve" });
    expect(controlsFor(sent, ann).edit.why).toMatch(/waiting for the server/);
    const ended = applyMessage(sent, { type: "episode.finished", seq: 9, data: { status: "finished" } });
    const c = controlsFor(ended, ann);
    expect(Object.values(c).every((a) => !a.enabled)).toBe(true);
    expect(c.finish.why).toBe("The episode is finished; it takes no more commands.");
  });
});
