import { describe, expect, it } from "vitest";
import { queueShort, waitingText } from "./queue";

describe("a queued episode's place in line", () => {
  it("says how many of its lane are ahead and running, in words", () => {
    expect(waitingText({ lane: "people", ahead: 2, running: 2 })).toBe(
      "Starting… waiting for a free live slot: 2 episodes ahead of yours (2 running).",
    );
    expect(waitingText({ lane: "people", ahead: 1, running: 0 })).toBe("Starting… waiting for a free live slot: 1 episode ahead of yours.");
    expect(waitingText({ lane: "people", ahead: 0, running: 2 })).toBe("Starting… next in line for a free live slot (2 running).");
    expect(waitingText({ lane: "machines", ahead: 40, running: 3 })).toBe(
      "Starting… waiting for a free rollout worker: 40 episodes ahead of yours (3 running).",
    );
    expect(waitingText(null)).toBe("Starting… waiting for a worker to pick this episode up.");
  });

  it("says it briefly in a list, and nothing once the episode runs", () => {
    expect(queueShort({ status: "queued", queue: { lane: "people", ahead: 2, running: 1 } })).toBe("2 ahead · 1 running");
    expect(queueShort({ status: "queued", queue: { lane: "people", ahead: 0, running: 0 } })).toBe("next in line");
    expect(queueShort({ status: "queued", queue: null })).toBe("waiting for a worker");
    expect(queueShort({ status: "running", queue: null })).toBe("");
  });
});
