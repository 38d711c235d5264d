import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Rejection } from "../api/episodes";
import type { Proposal } from "./episodeState";
import { attemptLine, ProposalPanel } from "./ProposalPanel";

function rejection(attempt: number, extra: Partial<Rejection> = {}): Rejection {
  return {
    attempt,
    thought: "the logo",
    action: { name: "click", args: { x: 1, y: 1 } },
    action_text: "click(x=1, y=1)",
    void_reason: "",
    reason: "that is the logo",
    action_format: "loupe",
    repeated: false,
    rejected_by: "ann",
    created_at: null,
    ...extra,
  };
}

function proposal(extra: Partial<Proposal> = {}): Proposal {
  return {
    index: 2,
    thought: "the OK button",
    action: { name: "click", args: { x: 80, y: 100 } },
    action_text: "click(x=80, y=100)",
    raw: "",
    void_reason: "",
    width: 160,
    height: 210,
    url: "",
    reason: "",
    screenshot_url: "",
    attempt: 1,
    rejected: [],
    repeated: false,
    confidence: null,
    ...extra,
  };
}

describe("ProposalPanel", () => {
  it("numbers the step from 1 and says nothing of rejects on a first proposal", () => {
    render(<ProposalPanel proposal={proposal()} deciding={false} me="ann" />);
    expect(screen.getByRole("heading", { level: 2 }).textContent).toBe("Proposed step 3");
    expect(screen.queryByTestId("proposal-attempt")).toBeNull();
  });

  it("says a proposal comes after your reject, lists what was rejected and why", () => {
    render(<ProposalPanel proposal={proposal({ attempt: 2, rejected: [rejection(1)] })} deciding={false} me="ann" />);
    const note = screen.getByTestId("proposal-attempt");
    expect(note.textContent).toContain("Proposal 2 for this step, after your reject.");
    expect(note.textContent).toContain("The model was told what you rejected and why");
    expect(screen.getByTestId("proposal-rejected").textContent).toBe("click(x=1, y=1) — “that is the logo”");
    expect(screen.queryByTestId("proposal-repeated")).toBeNull();
    expect(screen.getByTestId("proposal").dataset.attempt).toBe("2");
  });

  it("warns when the model proposes a rejected step again", () => {
    const again = proposal({ attempt: 3, rejected: [rejection(1), rejection(2, { rejected_by: "mia" })], repeated: true });
    render(<ProposalPanel proposal={again} deciding={false} me="ann" />);
    expect(screen.getByTestId("proposal-repeated").textContent).toContain("The model proposed the same step again");
    expect(screen.getByTestId("proposal-attempt").textContent).toContain("Proposal 3 for this step, after your and mia's rejects.");
  });
});

describe("attemptLine", () => {
  it("names whose rejects came before", () => {
    expect(attemptLine(proposal({ attempt: 2, rejected: [rejection(1, { rejected_by: "mia" })] }), "ann")).toBe(
      "Proposal 2 for this step, after mia's reject",
    );
    expect(attemptLine(proposal({ attempt: 2, rejected: [rejection(1, { rejected_by: null })] }), null)).toBe(
      "Proposal 2 for this step, after someone's reject",
    );
  });

  it("shows the model's confidence, and why it waits for a person when it is unsure", () => {
    const { rerender } = render(<ProposalPanel proposal={proposal({ confidence: 0.93 })} deciding={false} />);
    expect(screen.getByTestId("proposal-confidence").textContent).toBe("confidence 0.93");
    expect(screen.queryByTestId("proposal-unsure")).toBeNull();
    rerender(
      <ProposalPanel proposal={proposal({ confidence: 0.31, reason: "unsure" })} deciding={false} ask="confidence 0.31 < 0.5" />,
    );
    expect(screen.getByTestId("proposal-unsure").textContent).toContain("unsure of this step (confidence 0.31 < 0.5)");
    rerender(<ProposalPanel proposal={proposal({ confidence: null })} deciding={false} />);
    expect(screen.queryByTestId("proposal-confidence")).toBeNull();
  });
});
