import { act, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { makeEpisode, makeStep } from "../test/factories";
import { mockFetch } from "../test/http";
import { MockWebSocket } from "../test/MockWebSocket";
import { renderApp } from "../test/render";

beforeEach(() => {
  MockWebSocket.reset();
  vi.stubGlobal("WebSocket", MockWebSocket);
  mockFetch({
    "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
    "GET /api/v1/episodes/42/": { body: makeEpisode([makeStep(0)]) },
    "GET /api/v1/projects/1/": {
      body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "annotator", created_at: "" },
    },
    "GET /api/v1/projects/": { body: { results: [], next: null } },
    "GET /api/v1/health": { body: { status: "ok", checks: {} } },
  });
});
afterEach(() => vi.unstubAllGlobals());

describe("EpisodeViewerPage", () => {
  it("shows the loaded episode, then follows its WebSocket", async () => {
    renderApp("/episodes/42");
    const shot = await screen.findByTestId("episode-screenshot");
    expect(shot.getAttribute("src")).toBe("/media/shot-0.png");
    expect(screen.getByTestId("step-thought").textContent).toBe("thought 0");

    await waitFor(() => expect(MockWebSocket.instances.length).toBeGreaterThan(0));
    const socket = MockWebSocket.latest();
    expect(socket.url).toBe("ws://localhost:3000/ws/episodes/42/?after=0");
    expect(screen.getByTestId("connection-state").dataset.state).toBe("connecting");

    act(() => socket.open());
    expect(screen.getByTestId("connection-state").textContent).toContain("Live");

    act(() => {
      socket.receive({ type: "step.executed", seq: 1, data: makeStep(0) });
      socket.receive({ type: "step.executed", seq: 2, data: makeStep(1, { thought: "now the OK button" }) });
    });
    expect(screen.getByTestId("episode-screenshot").getAttribute("src")).toBe("/media/shot-1.png");
    expect(screen.getByTestId("step-thought").textContent).toBe("now the OK button");
    expect(screen.getByTestId("step-timeline").querySelectorAll("li")).toHaveLength(2);

    act(() => socket.drop(1006));
    expect(screen.getByTestId("connection-state").dataset.state).toBe("reconnecting");
  });
});
