import { screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { BranchComparison } from "../api/branch";
import type { ReplayStep } from "../api/review";
import { makeStep } from "../test/factories";
import { mockFetch } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes, reviewEpisode } from "../test/review";
import { pairSentence } from "./BranchCompare";

afterEach(() => vi.unstubAllGlobals());

const step = (episode: number, index: number, extra = {}) =>
  ({ ...makeStep(index, { screenshot_url: `/api/v1/episodes/${episode}/steps/${index}/screenshot`, ...extra }), proposal: null }) as ReplayStep;

function comparison(extra: Partial<BranchComparison> = {}): BranchComparison {
  return {
    branched_at: 1,
    branch: {
      episode: { ...reviewEpisode(51, { outcome: "success", reward: 1, review_status: "accepted" }), branch_of: { episode: 50, step: 1 } },
      judge: { verdict: "success", reason: "the form was sent", confidence: 1 },
      steps: [step(51, 1, { thought: "the lower button", action_text: "click(x=40, y=20)" }), step(51, 2)],
    },
    parent: {
      episode: { ...reviewEpisode(50, { outcome: "failure", reward: 0, review_status: "rejected" }), branch_of: null },
      judge: null,
      steps: [step(50, 1, { thought: "the upper button", action_text: "click(x=11, y=20)" })],
    },
    screens: [],
    pair: { index: 1, chosen: "branch", by: "review", in_dataset: true },
    no_pair: "",
    ...extra,
  };
}

describe("BranchCompare", () => {
  it("shows the branch and its parent side by side from the branch point, the pair's steps marked", async () => {
    mockFetch({ ...baseRoutes("manager"), "GET /api/v1/episodes/51/compare": { body: comparison() } });
    renderApp("/projects/1/review/51/compare");
    expect((await screen.findByTestId("compare-pair")).textContent).toBe(
      "At step 2 they acted differently on the same screen: the branch's (episode 51) step is preferred over the parent's, decided by the reviews. It is a pair in the DPO bucket.",
    );
    expect(screen.getByTestId("compare-branch-review").textContent).toBe("accepted");
    expect(screen.getByTestId("compare-parent-review").textContent).toBe("rejected");
    expect(screen.getByTestId("compare-branch-judge").textContent).toContain("success (the form was sent)");
    expect(screen.getByTestId("compare-parent-judge").textContent).toContain("no verdict");
    const mine = screen.getByTestId("compare-step-51-1");
    expect(within(mine).getByTestId("compare-mark").textContent).toBe("chosen");
    expect(mine.textContent).toContain("the lower button");
    expect(mine.textContent).toContain("click(x=40, y=20)");
    expect(within(screen.getByTestId("compare-step-50-1")).getByTestId("compare-mark").textContent).toBe("rejected");
    // step 3: the branch went on, the parent had ended
    expect(within(screen.getByTestId("compare-row-2")).getByText(/the episode had ended/)).toBeTruthy();
    expect(screen.queryByTestId("compare-row-0")).toBeNull(); // the shared steps before the branch point are not repeated
  });

  it("says for each step whether the two screens count as the same, and what differs", async () => {
    const screens = [
      { index: 1, differs: null },
      { index: 2, differs: 'element 3 (textbox "Name") has focused true where the stored step had false' },
    ];
    const both = comparison();
    both.parent!.steps.push(step(50, 2));
    mockFetch({ ...baseRoutes("manager"), "GET /api/v1/episodes/51/compare": { body: { ...both, screens } } });
    renderApp("/projects/1/review/51/compare");
    const same = within(await screen.findByTestId("compare-row-1")).getByTestId("compare-screens");
    expect(same.getAttribute("data-same")).toBe("true");
    expect(same.textContent).toContain("Same screen on both");
    const differs = within(screen.getByTestId("compare-row-2")).getByTestId("compare-screens");
    expect(differs.textContent).toBe(
      'The screens count as different: element 3 (textbox "Name") has focused true where the stored step had false.',
    );
  });

  it("says why there is no pair, and that a deleted parent leaves one side empty", () => {
    expect(pairSentence(comparison({ pair: null, no_pair: "Both took the same actions for as long as both had steps: no preference." }))).toBe(
      "Both took the same actions for as long as both had steps: no preference.",
    );
    expect(pairSentence(comparison({ pair: { index: 3, chosen: "parent", by: "judge", in_dataset: false } }))).toBe(
      "At step 4 they acted differently on the same screen: the parent's (episode 50) step is preferred over the branch's, decided by the judge. It joins the DPO bucket once the branch has finished.",
    );
  });

  it("shows the server's refusal for an episode that is not a branch", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      "GET /api/v1/episodes/50/compare": { status: 409, body: { detail: "Episode 50 is not a branch; compare from one of its branches." } },
    });
    renderApp("/projects/1/review/50/compare");
    expect((await screen.findByRole("alert")).textContent).toContain("Episode 50 is not a branch");
  });

  it("tells an annotator comparing is for managers, asking for nothing", async () => {
    const { requests } = mockFetch(baseRoutes("annotator"));
    renderApp("/projects/1/review/51/compare");
    expect(await screen.findByTestId("managers-only")).toBeTruthy();
    expect(requests.some((r) => r.url.includes("/compare"))).toBe(false);
  });
});
