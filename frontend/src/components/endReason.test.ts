import { describe, expect, it } from "vitest";
import { describeEndReason } from "./endReason";

describe("describeEndReason", () => {
  it("says every end reason the server writes in plain words", () => {
    // agent/rollout.py END_REASONS, as flywheel/rollout_worker.py stores them (code, or "code: detail").
    expect(describeEndReason("done")).toBe("The task ended (the page reported it done).");
    expect(describeEndReason("finished")).toBe("The agent said it had finished the task.");
    expect(describeEndReason("max_steps")).toBe("It reached the task's step limit.");
    expect(describeEndReason("void_turns")).toBe("The model's answers could not be read as actions several times in a row.");
    expect(describeEndReason("supervisor_finish")).toBe("A person finished the episode.");
    expect(describeEndReason("supervisor_finish: rejected_too_often")).toBe(
      "A person rejected the model's proposals for one step too many times.",
    );
    expect(describeEndReason("env_error: page crashed: net::ERR_ABORTED")).toBe(
      "The environment (the browser page) failed: page crashed: net::ERR_ABORTED",
    );
    expect(describeEndReason("policy_error: the policy server timed out after 3 tries")).toBe(
      "The model could not be asked for its next step: the policy server timed out after 3 tries",
    );
    // flywheel/rollout_worker.py, flywheel/services.py and annotation/supervision.py
    expect(describeEndReason("environment failed: Chromium exited")).toBe("The environment (the browser page) failed: Chromium exited");
    expect(describeEndReason("RuntimeError: boom")).toBe("The rollout crashed: RuntimeError: boom");
    expect(describeEndReason("no deployed policy")).toBe("The project has no deployed policy to act with.");
    expect(describeEndReason("worker live@host stopped responding")).toBe("The rollout worker live@host stopped responding.");
    expect(describeEndReason("no annotator acted for 600 s")).toBe("No annotator acted for 600 s.");
    expect(describeEndReason("stopped")).toBe("It was stopped.");
  });

  it("writes a code it does not know readably and never fails on odd input", () => {
    expect(describeEndReason("some_new_code")).toBe("Some new code.");
    expect(describeEndReason("quota_exceeded: 40 episodes")).toBe("Quota exceeded: 40 episodes");
    expect(describeEndReason("")).toBe("");
    expect(describeEndReason(null)).toBe("");
    expect(describeEndReason(undefined)).toBe("");
    expect(describeEndReason(":")).toBe("");
    expect(describeEndReason(": lost")).toBe("Lost.");
  });
});
