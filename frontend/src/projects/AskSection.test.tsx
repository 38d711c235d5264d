import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";

afterEach(() => vi.unstubAllGlobals());

const bucket = (low: number, steps: number, good: number | null) => ({ low, high: low + 0.1, steps, good });

function routes(extra: Routes = {}): Routes {
  return {
    ...baseRoutes("manager"),
    "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "manager", created_at: "" } },
    "GET /api/v1/projects/1/asking": { body: { ask_below: null } },
    "GET /api/v1/projects/1/asking/calibration": {
      body: {
        reviewed: 9,
        steps: 12,
        buckets: [bucket(0, 0, null), bucket(0.1, 4, 0.25), ...[0.2, 0.3, 0.4, 0.5, 0.6, 0.7].map((l) => bucket(l, 0, null)), bucket(0.8, 2, 1), bucket(0.9, 3, 1)],
        floors: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9].map((floor) => ({ floor, asked: floor > 0.2 ? 0.5 : 0.1, good_above: floor > 0.2 ? 1 : 0.6 })),
        suggested: 0.3,
        good_enough: 0.9,
        ask_below: null,
      },
    },
    ...extra,
  };
}

describe("AskSection (project settings, Asking a person)", () => {
  it("shows the calibration's suggested floor and charts, and sets the suggested floor in one click", async () => {
    const { requests } = mockFetch(routes({ "PATCH /api/v1/projects/1/asking": { body: { ask_below: 0.3 } } }));
    renderApp("/projects/1?tab=asking");
    expect((await screen.findByTestId("ask-suggested")).textContent).toContain("Suggested floor: 0.3 (above it, proposals were good 100 % of the time)");
    expect(screen.getByTestId("ask-calibration").querySelectorAll("svg")).toHaveLength(2);
    fireEvent.click(screen.getByTestId("ask-use-suggested"));
    expect((await screen.findByTestId("ask-saved")).textContent).toContain("below 0.3");
    await waitFor(() => expect(requests.some((r) => r.method === "PATCH" && JSON.stringify(r.body) === '{"ask_below":0.3}')).toBe(true));
  });

  it("refuses a floor outside 0-1 in the form, sending nothing", async () => {
    const { requests } = mockFetch(routes());
    renderApp("/projects/1?tab=asking");
    const field = await screen.findByTestId("ask-below");
    fireEvent.change(field, { target: { value: "1.5" } });
    expect(screen.getByTestId("ask-below-error").textContent).toContain("between 0 and 1");
    expect((screen.getByTestId("ask-save") as HTMLButtonElement).disabled).toBe(true);
    expect(requests.some((r) => r.method === "PATCH")).toBe(false);
  });
});
