import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch, type Routes } from "../test/http";
import { MockWebSocket } from "../test/MockWebSocket";
import { renderApp } from "../test/render";

afterEach(() => vi.unstubAllGlobals());

const signedIn: Routes = {
  "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
  "GET /api/v1/projects/": { body: { results: [], next: null } },
  "GET /api/v1/health": { body: { status: "ok", checks: {} } },
};

describe("pages whose project or episode is not there for you", () => {
  it("say a project you are not in is not yours, lead back to your projects and offer no Retry", async () => {
    mockFetch({ ...signedIn, "GET /api/v1/projects/7/": { status: 404, body: { detail: "No such project, or you are not a member of it." } } });
    renderApp("/projects/7/episodes");
    const banner = await screen.findByTestId("no-access");
    expect(banner.textContent).toContain("You are not a member of this project");
    expect(banner.textContent).not.toContain("Something went wrong");
    expect(screen.queryByRole("button", { name: "Retry" })).toBeNull();
    fireEvent.click(screen.getByTestId("no-access-home"));
    await waitFor(() => expect(screen.getByTestId("location").textContent).toBe("/"));
  });

  it("say an episode does not exist or is not accessible, with no Retry", async () => {
    MockWebSocket.reset();
    vi.stubGlobal("WebSocket", MockWebSocket);
    mockFetch({ ...signedIn, "GET /api/v1/episodes/99/": { status: 404, body: { detail: "No such episode, or you are not a member of its project." } } });
    renderApp("/episodes/99");
    const banner = await screen.findByTestId("no-access");
    expect(banner.textContent).toContain("This episode does not exist or you have no access to it");
    expect(screen.queryByRole("button", { name: "Retry" })).toBeNull();
    expect(screen.getByTestId("no-access-home").getAttribute("href")).toBe("/");
  });

  it("show the server's reason for a 403, and keep Retry for failures that may pass", async () => {
    mockFetch({ ...signedIn, "GET /api/v1/projects/7/": { status: 403, body: { detail: "This needs the annotator role in Demo; you are nobody." } } });
    const first = renderApp("/projects/7/runs");
    expect((await screen.findByTestId("no-access")).textContent).toContain("This needs the annotator role in Demo");
    first.unmount();

    mockFetch({ ...signedIn, "GET /api/v1/projects/7/": { status: 503, body: { detail: "The database is unavailable right now; retry in a few seconds." } } });
    renderApp("/projects/7/runs");
    expect(await screen.findByRole("button", { name: "Retry" })).toBeTruthy();
    expect(screen.queryByTestId("no-access")).toBeNull();
  });
});
