import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { ReviewQueue } from "../api/queues";
import { mockFetch } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";

afterEach(() => vi.unstubAllGlobals());

const LIST = "GET /api/v1/episodes/?project=1&status=finished&has_void=true&review_status=unreviewed";

function queue(over: Partial<ReviewQueue> = {}): ReviewQueue {
  return {
    id: 4, project: 1, name: "void turns", filter: {}, overlap: 2, state: "open", hold_seconds: 900, created_by: "mia",
    created_at: "", assignees: [{ id: 1, username: "mia" }],
    progress: { items: 3, pending: 3, done: 0, adjudication: 0, adjudicated: 0, reviews_done: 0, reviews_needed: 6, reviewers: [] },
    ...over,
  };
}

describe("Review queues on the review page", () => {
  it("a manager creates a queue from the list's current filters", async () => {
    const { requests } = mockFetch({
      ...baseRoutes("manager"),
      [LIST]: { body: { results: [], next: null, previous: null } },
      "POST /api/v1/projects/1/review-queues/": { status: 201, body: queue() },
    });
    renderApp("/projects/1/review?has_void=true");
    fireEvent.click(await screen.findByTestId("queue-new"));
    fireEvent.change(screen.getByTestId("queue-name"), { target: { value: "void turns" } });
    fireEvent.change(screen.getByTestId("queue-overlap"), { target: { value: "1" } });
    fireEvent.click(await screen.findByTestId("queue-assignee-ann"));
    fireEvent.click(screen.getByTestId("queue-create"));
    await waitFor(() => expect(requests.some((r) => r.method === "POST")).toBe(true));
    const sent = requests.find((r) => r.method === "POST")!;
    expect(sent.body).toEqual({
      name: "void turns", overlap: 1, assignees: [2],
      filter: { status: "finished", has_void: "true", review_status: "unreviewed" },
    });
  });

  it("counts a queue name near its limit, refuses one past it, and says the server's refusals beside their fields", async () => {
    const { requests } = mockFetch({
      ...baseRoutes("manager"),
      [LIST]: { body: { results: [], next: null, previous: null } },
      "POST /api/v1/projects/1/review-queues/": {
        status: 400, body: { detail: "Assign at least one reviewer.", errors: { assignees: ["Assign at least one reviewer."] } },
      },
    });
    renderApp("/projects/1/review?has_void=true");
    fireEvent.click(await screen.findByTestId("queue-new"));
    const name = screen.getByTestId("queue-name") as HTMLInputElement;
    fireEvent.change(name, { target: { value: "q".repeat(201) } });
    expect(name.value.length).toBe(201);
    expect(screen.getByTestId("limit-queue_name").textContent).toContain("1 too many");
    expect((screen.getByTestId("queue-create") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(name, { target: { value: "void turns" } });
    fireEvent.click(screen.getByTestId("queue-create"));
    const fieldset = (await screen.findByTestId("queue-assignee-ann")).closest("fieldset") as HTMLElement;
    await waitFor(() => expect(fieldset.querySelector(".field-error")?.textContent).toBe("Assign at least one reviewer."));
    expect(document.body.textContent?.split("Assign at least one reviewer.").length).toBe(2);
    fireEvent.click(screen.getByTestId("queue-assignee-ann"));
    expect(fieldset.querySelector(".field-error")).toBeNull();
    expect(requests.filter((r) => r.method === "POST").length).toBe(1);
  });

  it("an assignee's Review next opens the replay of the episode the queue holds for them", async () => {
    mockFetch({
      ...baseRoutes("annotator"),
      "GET /api/v1/projects/1/review-queues/": { body: { results: [queue()] } },
      "POST /api/v1/review-queues/4/next": {
        body: { queue: 4, item: 9, episode: 12, held_until: "", reviewed_by_you: 0, left_for_you: 3 },
      },
    });
    renderApp("/projects/1/review");
    fireEvent.click(await screen.findByTestId("queue-review-next"));
    await waitFor(() => expect(screen.getByTestId("location").textContent).toBe("/projects/1/review/12?queue=4&item=9"));
  });
});
