import { describe, expect, it } from "vitest";
import { makeStep } from "../test/factories";
import {
  formatAction,
  proposalActionText,
  proposalThought,
  replayCommand,
  stepActionText,
  stepAtTime,
  stepForAudio,
  wordAtTime,
} from "./replay";

const at = (seconds: number) => new Date(seconds * 1000).toISOString();
const steps = [0, 1, 2].map((i) => ({ ...makeStep(i), created_at: at(1000 + 10 * (i + 1)) })); // ends 1010, 1020, 1030
const word = (w: string, start: number, end: number, step: number | null) => ({ word: w, start, end, step });

function key(k: string, target: Partial<HTMLElement> = { tagName: "BODY" }, shiftKey = false) {
  return { key: k, altKey: false, ctrlKey: false, metaKey: false, shiftKey, target: target as EventTarget };
}

describe("replay text", () => {
  it("writes actions in the grammar, from the stored action when the text is missing", () => {
    expect(formatAction({ name: "click", args: { x: 8, y: 12 } })).toBe("click(x=8, y=12)");
    expect(formatAction({ name: "type", args: { text: 'say "hi"' } })).toBe('type(text="say \\"hi\\"")');
    expect(stepActionText({ action: { name: "click", args: { x: 1, y: 2 } }, action_text: "" })).toBe("click(x=1, y=2)");
    expect(formatAction(null)).toBe("");
  });

  it("reads a proposal from its fields, or from its raw turn when that is all there is", () => {
    expect(proposalActionText({ action_text: "wait()" })).toBe("wait()");
    expect(proposalActionText({ action: { name: "click", args: { x: 2, y: 2 } } })).toBe("click(x=2, y=2)");
    const raw = { raw: "Thought: click cancel\nAction: click(x=2, y=2)" };
    expect(proposalActionText(raw)).toBe("click(x=2, y=2)");
    expect(proposalThought(raw)).toBe("click cancel");
    expect(proposalThought({ thought: "t", raw: "Thought: other" })).toBe("t");
  });
});

describe("following the audio", () => {
  it("puts a time in the step whose window holds it: up to the moment the step was stored", () => {
    expect(stepAtTime(steps, 1000)).toBe(0);
    expect(stepAtTime(steps, 1010)).toBe(0);
    expect(stepAtTime(steps, 1010.5)).toBe(1);
    expect(stepAtTime(steps, 1029)).toBe(2);
    expect(stepAtTime(steps, 5000)).toBe(2); // after the last step: stays on it
    expect(stepAtTime([], 1)).toBeNull();
  });

  it("finds the word being said, and prefers the word's own step to the window", () => {
    const words = [word("the", 1001, 1001.4, 0), word("button", 1009.8, 1010.6, 1)];
    expect(wordAtTime(words, 1001.2)).toBe(0);
    expect(wordAtTime(words, 1005)).toBe(-1);
    expect(stepForAudio(words, steps, 1010.2)).toBe(1); // spoken at the boundary, aligned to step 1
    expect(stepForAudio(words, steps, 1005)).toBe(0); // silence: the window decides
  });
});

describe("replay keys", () => {
  it("steps with arrows and j/k, moves between episodes with [ ] and shift+arrows, grades with digits", () => {
    expect(replayCommand(key("ArrowRight"))).toBe("next-step");
    expect(replayCommand(key("k"))).toBe("previous-step");
    expect(replayCommand(key("ArrowLeft", undefined, true))).toBe("previous-episode");
    expect(replayCommand(key("]"))).toBe("next-episode");
    expect(replayCommand(key("a"))).toBe("accept");
    expect(replayCommand(key("4"))).toEqual({ grade: 4 });
    expect(replayCommand(key("6"))).toBeNull();
    expect(replayCommand({ ...key("ArrowRight"), ctrlKey: true })).toBeNull();
  });

  it("leaves a person typing alone, and lets a drop-down keep its letters but not the arrows", () => {
    expect(replayCommand(key("ArrowLeft", { tagName: "TEXTAREA" }))).toBeNull();
    expect(replayCommand(key("j", { tagName: "INPUT" }))).toBeNull();
    expect(replayCommand(key("ArrowRight", { tagName: "AUDIO" }))).toBeNull();
    expect(replayCommand(key("ArrowRight", { tagName: "SELECT" }))).toBe("next-step");
    expect(replayCommand(key("g", { tagName: "SELECT" }))).toBeNull();
    expect(replayCommand(key("a", { tagName: "SELECT" }))).toBeNull();
  });
});
