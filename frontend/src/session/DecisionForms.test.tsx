import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { InstructionCard } from "../components/InstructionCard";
import { EditForm, FinishForm, RejectForm, thoughtProblem } from "./DecisionForms";
import type { Proposal } from "./episodeState";

const proposal: Proposal = {
  index: 2, thought: "Click the logo.", action: { name: "click", args: { x: 10, y: 20 } }, action_text: "click(x=10, y=20)",
  raw: "", void_reason: "", width: 160, height: 210, url: "", reason: "", screenshot_url: "", attempt: 1, rejected: [],
  repeated: false, confidence: null,
};

const submitButton = (id: string) => screen.getByTestId(id) as HTMLButtonElement;

describe("EditForm", () => {
  it("asks for the person's own thought when only the action changed, and sends none once cleared", () => {
    const onSubmit = vi.fn();
    render(<EditForm proposal={proposal} onSubmit={onSubmit} onCancel={() => {}} />);
    fireEvent.change(screen.getByTestId("edit-action"), { target: { value: "click(x=30, y=40)" } });
    expect(screen.getByTestId("edit-thought-error").textContent).toContain("This is still the model's thought");
    expect(submitButton("edit-submit").disabled).toBe(true);
    fireEvent.submit(screen.getByTestId("edit-action"));
    expect(onSubmit).not.toHaveBeenCalled();
    fireEvent.click(screen.getByTestId("edit-thought-clear"));
    fireEvent.click(submitButton("edit-submit"));
    expect(onSubmit).toHaveBeenCalledWith({ thought: "", action: "click(x=30, y=40)" });
  });

  it("takes a thought the person rewrote, and a thought-only edit of the model's action", () => {
    expect(thoughtProblem(proposal, "The OK button is lower.", "click(x=30, y=40)")).toBeNull();
    expect(thoughtProblem(proposal, "Click  the logo. ", "click(x=10, y=20)")).toBeNull();
    expect(thoughtProblem(proposal, " Click the\nlogo.", "click(x=11, y=20)")).not.toBeNull();
  });
});

describe("RejectForm", () => {
  it("counts near the limit and does not send a reason past it, keeping the text", () => {
    const onSubmit = vi.fn();
    render(<RejectForm proposal={proposal} onSubmit={onSubmit} onCancel={() => {}} />);
    const long = "x".repeat(4001);
    fireEvent.change(screen.getByTestId("reject-reason"), { target: { value: long } });
    expect(screen.getByTestId("limit-reject_reason").textContent).toBe(
      "4,001 / 4,000 characters: 1 too many, shorten it to send",
    );
    expect(submitButton("reject-submit").disabled).toBe(true);
    fireEvent.submit(screen.getByTestId("reject-reason"));
    expect(onSubmit).not.toHaveBeenCalled();
    expect((screen.getByTestId("reject-reason") as HTMLInputElement).value).toBe(long);
  });
});

describe("FinishForm", () => {
  it("has no outcome chosen, asks for one, then sends it with the comment", () => {
    const onSubmit = vi.fn();
    render(<FinishForm onSubmit={onSubmit} onCancel={() => {}} />);
    expect((screen.getByTestId("finish-outcome") as HTMLSelectElement).value).toBe("");
    fireEvent.click(submitButton("finish-submit"));
    expect(onSubmit).not.toHaveBeenCalled();
    expect(screen.getByTestId("finish-outcome-error").textContent).toBe("Choose how the episode ended first.");
    fireEvent.change(screen.getByTestId("finish-outcome"), { target: { value: "failure" } });
    fireEvent.change(screen.getByTestId("finish-comment"), { target: { value: " The page never loaded. " } });
    fireEvent.click(submitButton("finish-submit"));
    expect(onSubmit).toHaveBeenCalledWith({ outcome: "failure", comment: "The page never loaded." });
  });
});

describe("InstructionCard", () => {
  const task = { id: 1, task_name: "make-reports", env_kind: "desktop", split: "train" as const };
  it("shows the environment's instruction, and on a desktop how to reach its apps", () => {
    render(<InstructionCard episode={{ instruction: "Make a folder named reports.", status: "running", task }} />);
    expect(screen.getByTestId("instruction-text").textContent).toBe("Make a folder named reports.");
    expect(screen.getByTestId("desktop-hint").textContent).toContain("right-click it for the apps menu");
  });

  it("says when the instruction will come, and shows no desktop hint on a web page", () => {
    render(<InstructionCard episode={{ instruction: "", status: "queued", task: { ...task, env_kind: "miniwob" } }} />);
    expect(screen.getByTestId("instruction-text").textContent).toBe("The instruction appears when the episode starts.");
    expect(screen.queryByTestId("desktop-hint")).toBeNull();
  });
});
