import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { Cycle } from "../api/cycles";
import { LearnedTable, shareText } from "./LearnedTable";

const share = (corrections: number, learned: number) => ({ corrections, learned, share: corrections ? learned / corrections : null });

function cycleWith(learned: unknown): Cycle {
  return { candidate: { id: 2, name: "c1" }, decision_data: { learned } } as unknown as Cycle;
}

describe("LearnedTable", () => {
  it("shows the shares learned, trained on and held out, per task and per kind of correction", () => {
    render(
      <LearnedTable
        cycle={cycleWith({
          trained: share(7, 6),
          held_out: share(2, 2),
          by_task: [{ task: "terminal-count", trained: share(7, 6), held_out: share(2, 2) }],
          by_kind: [
            { kind: "edit", trained: share(5, 5), held_out: share(1, 1) },
            { kind: "takeover", trained: share(1, 0), held_out: share(1, 1) },
            { kind: "rejection", trained: share(1, 1), held_out: share(0, 0) },
          ],
        })}
      />,
    );
    expect(screen.getByTestId("cycle-learned-total").textContent).toBe(
      "Learned 6 of 7 (86 %) of the corrections it trained on; 2 of 2 (100 %) of those held out, which it never saw.",
    );
    const rows = [...screen.getByTestId("cycle-learned-table").querySelectorAll("tbody tr")].map((r) => r.textContent);
    expect(rows).toEqual([
      "terminal-count6 of 7 (86 %)2 of 2 (100 %)",
      "edits5 of 5 (100 %)1 of 1 (100 %)",
      "takeovers0 of 1 (0 %)1 of 1 (100 %)",
      "answered rejections1 of 1 (100 %)—",
    ]);
  });

  it("says when no training row was a correction, and shows nothing for a cycle that never replayed", () => {
    const { rerender } = render(
      <LearnedTable cycle={cycleWith({ trained: share(0, 0), held_out: share(0, 0), by_task: [], by_kind: [] })} />,
    );
    expect(screen.getByTestId("cycle-learned-none")).toBeTruthy();
    rerender(<LearnedTable cycle={cycleWith(undefined)} />);
    expect(screen.queryByTestId("cycle-learned")).toBeNull();
    expect(shareText(share(0, 0))).toBe("—");
  });
});
