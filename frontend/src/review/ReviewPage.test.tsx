import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes, reviewEpisode } from "../test/review";

afterEach(() => vi.unstubAllGlobals());

const DEFAULT = "GET /api/v1/episodes/?project=1&status=finished&review_status=unreviewed";

describe("ReviewPage (the list)", () => {
  it("lists finished, unreviewed episodes by default, and a filter goes into the URL and the request", async () => {
    const { requests } = mockFetch({
      ...baseRoutes("manager"),
      [DEFAULT]: { body: { results: [reviewEpisode(12), reviewEpisode(11, { n_interventions: 2, mode: "supervised" })], next: null, previous: null } },
      "GET /api/v1/episodes/?project=1&status=finished&has_interventions=true&review_status=unreviewed": {
        body: { results: [reviewEpisode(11, { n_interventions: 2 })], next: null, previous: null },
      },
    });
    renderApp("/projects/1/review");
    await waitFor(() => expect(screen.getAllByTestId("review-row")).toHaveLength(2));
    fireEvent.change(screen.getByTestId("review-filter-has_interventions"), { target: { value: "true" } });
    await waitFor(() => expect(screen.getAllByTestId("review-row")).toHaveLength(1));
    expect(screen.getByTestId("location").textContent).toBe("/projects/1/review?has_interventions=true");
    expect(requests.some((r) => r.url.includes("&has_interventions=true&"))).toBe(true);
    // The default can be cleared to "any" without coming back.
    fireEvent.change(screen.getByTestId("review-filter-review_status"), { target: { value: "" } });
    await waitFor(() => expect(screen.getByTestId("location").textContent).toContain("review_status=any"));
  });

  it("pages by the API's keyset links and opens an episode with the list's query kept", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      [DEFAULT]: {
        body: { results: [reviewEpisode(12)], next: "http://testserver/api/v1/episodes/?cursor=cD0xMg%3D%3D&project=1", previous: null },
      },
      [`${DEFAULT}&cursor=cD0xMg%3D%3D`]: {
        body: { results: [reviewEpisode(5)], next: null, previous: "http://testserver/api/v1/episodes/?cursor=back&project=1" },
      },
    });
    renderApp("/projects/1/review");
    await screen.findByTestId("review-row");
    expect((screen.getByTestId("review-previous") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("review-next"));
    await waitFor(() => expect(screen.getByTestId("review-row").getAttribute("data-episode-id")).toBe("5"));
    expect(screen.getByTestId("location").textContent).toBe("/projects/1/review?cursor=cD0xMg%3D%3D");
    fireEvent.click(screen.getByTestId("review-row"));
    expect(screen.getByTestId("location").textContent).toBe("/projects/1/review/5?cursor=cD0xMg%3D%3D");
  });

  it("shows the server's refusal of a bad filter as it is", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      "GET /api/v1/episodes/?project=1&status=finished&reward_min=abc&review_status=unreviewed": {
        status: 400,
        body: { detail: "'reward_min': expected a number, got 'abc'.", errors: { reward_min: ["expected a number"] } },
      },
    });
    renderApp("/projects/1/review?reward_min=abc");
    expect((await screen.findByRole("alert")).textContent).toContain("expected a number, got 'abc'");
  });

  it("tells an annotator the page is for managers, and the navigation does not offer it", async () => {
    const { requests } = mockFetch(baseRoutes("annotator"));
    renderApp("/projects/1/review");
    expect((await screen.findByTestId("managers-only")).textContent).toContain("Only managers");
    const nav = screen.getByRole("navigation", { name: "Project sections" });
    expect(nav.textContent).not.toContain("Review");
    expect(nav.textContent).not.toContain("Datasets");
    expect(requests.some((r) => r.url.startsWith("/api/v1/episodes/"))).toBe(false);
  });
});
