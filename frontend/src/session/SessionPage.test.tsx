import { act, fireEvent, screen, waitFor } from "@testing-library/react";
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

/** Open the page, connect its socket and say hello as `username`; returns the socket. */
async function openSession(username = "ann", role = "annotator") {
  renderApp("/episodes/42");
  await screen.findByTestId("episode-screenshot");
  await waitFor(() => expect(MockWebSocket.instances.length).toBeGreaterThan(0));
  const socket = MockWebSocket.latest();
  act(() => {
    socket.open();
    socket.receive({ type: "hello", data: { server_time: 1, role, username, after: 0 } });
  });
  return socket;
}

function propose(socket: MockWebSocket, seq: number, index: number, extra: Record<string, unknown> = {}) {
  act(() =>
    socket.receive({
      type: "step.proposed",
      seq,
      data: {
        index,
        thought: "press OK",
        action: { name: "click", args: { x: 80, y: 100 } },
        action_text: "click(x=80, y=100)",
        raw: "",
        void_reason: null,
        width: 160,
        height: 210,
        url: "",
        reason: "",
        screenshot_url: `/api/v1/episodes/42/proposals/${index}/screenshot`,
        ...extra,
      },
    }),
  );
}

const lastSent = (socket: MockWebSocket) => socket.sent[socket.sent.length - 1] as Record<string, unknown>;
const button = (id: string) => screen.getByTestId(id) as HTMLButtonElement;

describe("SessionPage", () => {
  it("shows the live frame with a Live badge, and the still of a proposal that opens after it", async () => {
    const socket = await openSession();
    propose(socket, 1, 1);
    act(() => socket.receive({ type: "live.frame", data: { frame: 1, width: 160, height: 210, jpeg_b64: "/9j/4AAQ" } }));
    expect(screen.getByTestId("episode-screenshot").getAttribute("src")).toBe("data:image/jpeg;base64,/9j/4AAQ");
    expect(screen.getByTestId("live-badge").textContent).toBe("Live");
    propose(socket, 2, 2);
    expect(screen.queryByTestId("live-badge")).toBeNull();
    expect(screen.getByTestId("episode-screenshot").getAttribute("src")).toBe("/api/v1/episodes/42/proposals/2/screenshot");
  });

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
      socket.receive({ type: "presence", data: { watchers: ["ann", "mia"] } });
    });
    expect(screen.getByTestId("episode-screenshot").getAttribute("src")).toBe("/media/shot-1.png");
    expect(screen.getByTestId("step-thought").textContent).toBe("now the OK button");
    expect(screen.getByTestId("step-timeline").querySelectorAll("li")).toHaveLength(2);
    expect(screen.getByTestId("watchers").textContent).toBe("ann (you)mia");

    act(() => socket.drop(1006));
    expect(screen.getByTestId("connection-state").dataset.state).toBe("reconnecting");
  });

  it("lets the controller approve the open proposal on its own screenshot, pending until the ack", async () => {
    const socket = await openSession();
    act(() => socket.receive({ type: "control.changed", seq: 1, data: { control: { username: "ann" }, human_control: false } }));
    expect(screen.getByTestId("control-owner").textContent).toContain("You control this episode");
    expect(button("cmd-approve").disabled).toBe(true);
    expect(button("cmd-approve").title).toBe("Nothing is proposed right now; wait for the next proposal.");

    propose(socket, 2, 1);
    expect(screen.getByTestId("proposal-action").textContent).toBe("click(x=80, y=100)");
    expect(screen.getByTestId("episode-screenshot").getAttribute("src")).toBe("/api/v1/episodes/42/proposals/1/screenshot");
    fireEvent.click(button("cmd-approve"));
    const sent = lastSent(socket);
    expect(sent).toMatchObject({ type: "approve", index: 1 });
    expect(button("cmd-approve").disabled).toBe(true);
    expect(button("cmd-approve").title).toMatch(/waiting for the server/);

    act(() => socket.receive({ type: "ack", id: sent.id, status: "accepted", command: "approve", duplicate: false }));
    expect(button("cmd-approve").disabled).toBe(false);
    act(() => socket.receive({ type: "step.executed", seq: 3, data: makeStep(1) }));
    expect(screen.queryByTestId("proposal")).toBeNull();
  });

  it("edits with a live grammar check and submits with Ctrl+Enter; shortcuts drive the rest", async () => {
    const socket = await openSession();
    propose(socket, 1, 1);
    fireEvent.keyDown(window, { key: "e" });
    const actionField = (await screen.findByTestId("edit-action")) as HTMLInputElement;
    expect(actionField.value).toBe("click(x=80, y=100)");

    fireEvent.change(actionField, { target: { value: "click(x=80)" } });
    expect(screen.getByTestId("edit-error").textContent).toBe("click needs x and y, got only x");
    expect(button("edit-submit").disabled).toBe(true);
    fireEvent.change(actionField, { target: { value: "click(x=500, y=1)" } });
    expect(screen.getByTestId("edit-error").textContent).toBe("(500, 1) is outside the 160x210 screenshot.");
    // Typing letters in the field is text, not shortcuts.
    fireEvent.keyDown(actionField, { key: "a" });
    expect(socket.sent).toHaveLength(0);

    fireEvent.change(actionField, { target: { value: "click( 12 ,40 )" } });
    fireEvent.change(screen.getByTestId("edit-thought"), { target: { value: "the OK button is higher up" } });
    expect(screen.queryByTestId("edit-error")).toBeNull();
    fireEvent.keyDown(actionField, { key: "Enter", ctrlKey: true });
    expect(lastSent(socket)).toMatchObject({ type: "edit", index: 1, action: "click(x=12, y=40)", thought: "the OK button is higher up" });
    expect(screen.queryByTestId("edit-action")).toBeNull();

    fireEvent.keyDown(window, { key: " " });
    expect(lastSent(socket)).toMatchObject({ type: "pause" });
    fireEvent.keyDown(window, { key: "?" });
    expect(screen.getByTestId("shortcuts-overlay").textContent).toContain("Take over");
    fireEvent.keyDown(window, { key: "Escape" });
    expect(screen.queryByTestId("shortcuts-overlay")).toBeNull();
  });

  it("shows a watcher who controls, with disabled buttons that say why", async () => {
    const socket = await openSession();
    propose(socket, 1, 1);
    act(() => socket.receive({ type: "control.changed", seq: 2, data: { control: { username: "bob" }, human_control: false } }));
    expect(screen.getByTestId("control-owner").textContent).toBe("Watching — bob controls this episode");
    expect(button("cmd-approve").disabled).toBe(true);
    expect(button("cmd-approve").title).toMatch(/^bob controls this episode; you are watching/);
    expect(button("cmd-claim").disabled).toBe(true);
    fireEvent.keyDown(window, { key: "a" });
    expect(socket.sent).toHaveLength(0);
  });

  it("says why a shortcut did nothing when someone else controls the episode, then lets the hint go", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      const socket = await openSession("mia", "manager");
      propose(socket, 1, 1);
      act(() => socket.receive({ type: "control.changed", seq: 2, data: { control: { username: "bob" }, human_control: false } }));
      for (const key of ["a", "e", "r", "t", " ", "f"]) {
        fireEvent.keyDown(window, { key });
        expect(screen.getByTestId("shortcut-hint").textContent).toBe("bob controls this episode; you are watching. Press C to claim control.");
      }
      expect(socket.sent).toHaveLength(0);
      expect(screen.queryByTestId("edit-action")).toBeNull();
      act(() => vi.advanceTimersByTime(7000));
      expect(screen.queryByTestId("shortcut-hint")).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });

  it("explains that a void turn cannot be approved when A is pressed on it", async () => {
    const socket = await openSession();
    propose(socket, 1, 1, { action: null, action_text: "", void_reason: "no 'Action:' line found", raw: "I am not sure" });
    fireEvent.keyDown(window, { key: "a" });
    expect(socket.sent).toHaveLength(0);
    expect(screen.getByTestId("shortcut-hint").textContent).toBe(
      "The model's answer could not be read as an action, so it cannot be approved: edit it (E) or reject it (R).",
    );
    fireEvent.keyDown(window, { key: "e" }); // editing it is allowed
    expect(await screen.findByTestId("edit-action")).toBeTruthy();
  });

  it("lets a manager claim from someone else", async () => {
    const socket = await openSession("mia", "manager");
    act(() => socket.receive({ type: "control.changed", seq: 1, data: { control: { username: "bob" }, human_control: false } }));
    expect(button("cmd-claim").disabled).toBe(false);
    fireEvent.click(button("cmd-claim"));
    expect(lastSent(socket)).toMatchObject({ type: "claim" });
  });

  it("after a takeover, turns clicks on the screenshot and the typing controls into act commands", async () => {
    const socket = await openSession();
    propose(socket, 1, 1);
    fireEvent.click(button("cmd-takeover"));
    expect(lastSent(socket)).toMatchObject({ type: "takeover" });
    act(() => socket.receive({ type: "control.changed", seq: 2, data: { control: { username: "ann" }, human_control: true } }));
    expect(screen.getByTestId("cmd-handback")).toBeTruthy();
    expect(button("cmd-approve").disabled).toBe(true);

    const image = screen.getByTestId("episode-screenshot");
    // Shown 3x larger (480x630) than the 160x210 screenshot, 100 px from the viewport's corner.
    image.getBoundingClientRect = () => ({ left: 100, top: 100, width: 480, height: 630, right: 580, bottom: 730, x: 100, y: 100, toJSON: () => ({}) });
    fireEvent.change(screen.getByTestId("act-thought"), { target: { value: "OK is here" } });
    fireEvent.click(image, { clientX: 100 + 360, clientY: 100 + 144 });
    expect(lastSent(socket)).toMatchObject({ type: "act", action: "click(x=120, y=48)", thought: "OK is here" });

    fireEvent.change(screen.getByTestId("type-text"), { target: { value: 'say "hi"' } });
    fireEvent.click(button("type-submit"));
    // the reason stays for the next action until the person changes or clears it
    expect(lastSent(socket)).toMatchObject({ type: "act", action: 'type(text="say \\"hi\\"")', thought: "OK is here" });
    expect((screen.getByTestId("act-thought") as HTMLInputElement).value).toBe("OK is here");
    fireEvent.click(button("act-thought-clear"));
    fireEvent.click(button("key-enter"));
    expect(lastSent(socket).thought).toBeUndefined();
    expect(lastSent(socket)).toMatchObject({ type: "act", action: 'hotkey(keys="enter")' });
    fireEvent.click(button("scroll-down"));
    expect(lastSent(socket)).toMatchObject({ type: "act", action: 'scroll(x=80, y=105, direction="down")' });
  });

  it("shows every error, marks void turns and the agent's question, and sums up the finished episode", async () => {
    const socket = await openSession();
    propose(socket, 1, 1, { action: null, action_text: "", void_reason: "no 'Action:' line found", raw: "I am not sure" });
    expect(screen.getByTestId("proposal-void").textContent).toContain("no 'Action:' line found");
    expect(button("cmd-approve").title).toMatch(/^The model's answer could not be read as an action, so it cannot be approved/);

    fireEvent.click(button("cmd-reject"));
    fireEvent.change(screen.getByTestId("reject-reason"), { target: { value: "say something" } });
    fireEvent.click(button("reject-submit"));
    const reject = lastSent(socket);
    expect(reject).toMatchObject({ type: "reject", index: 1, reason: "say something" });
    act(() => socket.receive({ type: "error", id: reject.id, data: { message: "Proposal 1 was already decided; the open one is 2." } }));
    expect(screen.getByTestId("toast").textContent).toContain("Proposal 1 was already decided; the open one is 2.");

    propose(socket, 2, 2, {
      action: { name: "call_user", args: { question: "Which account?" } },
      action_text: 'call_user(question="Which account?")',
      reason: "call_user",
    });
    expect(screen.getByTestId("call-user").textContent).toContain("Which account?");
    expect(button("call-user-send").disabled).toBe(true); // nothing to send yet
    fireEvent.change(screen.getByTestId("call-user-answer"), { target: { value: "  the work one  " } });
    fireEvent.click(button("call-user-send"));
    expect(lastSent(socket)).toMatchObject({ type: "approve", index: 2, answer: "the work one" });

    fireEvent.keyDown(window, { key: "f" });
    fireEvent.change(screen.getByTestId("finish-outcome"), { target: { value: "infeasible" } });
    fireEvent.change(screen.getByTestId("finish-comment"), { target: { value: "no account given" } });
    fireEvent.click(button("finish-submit"));
    expect(lastSent(socket)).toMatchObject({ type: "finish", outcome: "infeasible", comment: "no account given" });

    act(() =>
      socket.receive({ type: "episode.finished", seq: 3, data: { status: "finished", end_reason: "supervisor_finish", reward: 0, outcome: "infeasible" } }),
    );
    expect(screen.getByTestId("episode-status").dataset.status).toBe("finished");
    expect(screen.getByTestId("finished-outcome").textContent).toBe("infeasible");
    expect(screen.getByTestId("finished-reason").textContent).toBe("A person finished the episode.");
    expect(screen.getByTestId("finished-reward").textContent).toBe("0");
    expect(screen.queryByTestId("cmd-approve")).toBeNull();
    expect(screen.getByRole("link", { name: "Back to live sessions" }).getAttribute("href")).toBe("/projects/1/episodes");
  });

  it("numbers steps from 1 for people, as the replay does, while commands keep the 0-based index", async () => {
    const socket = await openSession();
    expect(screen.getByRole("heading", { name: "Latest step (1)" })).toBeTruthy(); // makeStep(0)
    propose(socket, 1, 1);
    expect(screen.getByTestId("episode-screenshot").getAttribute("alt")).toBe("Screen for proposed step 2");
    fireEvent.keyDown(window, { key: "e" });
    expect(await screen.findByRole("heading", { name: "Edit step 2" })).toBeTruthy();
    fireEvent.keyDown(window, { key: "Escape" });
    fireEvent.keyDown(window, { key: "r" });
    expect(await screen.findByRole("heading", { name: "Reject step 2" })).toBeTruthy();
    fireEvent.click(button("reject-submit"));
    expect(lastSent(socket)).toMatchObject({ type: "reject", index: 1 });
  });

  it("shows the model's proposal beside a person's correction in the timeline", async () => {
    const socket = await openSession();
    act(() =>
      socket.receive({
        type: "step.executed",
        seq: 1,
        data: makeStep(1, { actor: "edited", action_text: "click(x=12, y=40)", proposal: { thought: "m", action_text: "click(x=80, y=100)" } }),
      }),
    );
    const items = screen.getByTestId("step-timeline").querySelectorAll("li");
    expect(items[1].textContent).toContain("edited");
    expect(items[1].querySelector("[data-testid=timeline-proposal]")?.textContent).toBe("was click(x=80, y=100)");
    expect(screen.getByTestId("step-proposal").textContent).toContain("click(x=80, y=100)");
  });

  it("while queued, says its place in line and asks again every few seconds, until it starts", async () => {
    vi.useFakeTimers({ shouldAdvanceTime: true });
    try {
      const queued = (ahead: number, running: number) => ({
        ...makeEpisode([]),
        status: "queued" as const,
        started_at: null,
        queue: { lane: "people" as const, ahead, running },
      });
      let answers = [queued(2, 2), queued(0, 2), { ...makeEpisode([]), status: "running" as const, queue: null }];
      const { requests } = mockFetch({
        "GET /api/v1/auth/session": { body: { user: { id: 1, username: "ann", is_staff: false } } },
        "GET /api/v1/episodes/42/": () => {
          const body = answers[0];
          if (answers.length > 1) answers = answers.slice(1);
          return { body };
        },
        "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "annotator", created_at: "" } },
        "GET /api/v1/projects/": { body: { results: [], next: null } },
        "GET /api/v1/health": { body: { status: "ok", checks: {} } },
      });
      const episodeGets = () => requests.filter((r) => r.url === "/api/v1/episodes/42/").length;
      renderApp("/episodes/42");
      const card = await screen.findByTestId("queue-position");
      expect(card.textContent).toContain("Starting… waiting for a free live slot: 2 episodes ahead of yours (2 running).");
      expect(card.getAttribute("role")).toBe("status");
      const before = episodeGets();

      // others start: no event reaches this episode's socket, the page asks again
      await act(() => vi.advanceTimersByTimeAsync(3100));
      await waitFor(() => expect(screen.getByTestId("queue-position").textContent).toContain("Starting… next in line for a free live slot (2 running)."));
      expect(episodeGets()).toBe(before + 1);

      // it starts (the socket says so too): the card goes, and the page stops asking
      await act(() => vi.advanceTimersByTimeAsync(3100));
      const socket = MockWebSocket.latest();
      act(() => {
        socket.open();
        socket.receive({ type: "episode.state", seq: 1, data: { status: "running", queue: null } });
      });
      await waitFor(() => expect(screen.queryByTestId("queue-position")).toBeNull());
      const after = episodeGets();
      await act(() => vi.advanceTimersByTimeAsync(10_000));
      expect(episodeGets()).toBe(after);
    } finally {
      vi.useRealTimers();
    }
  });

  it("shows a takeover that did what the model proposed as no correction, and the rejects before a step", async () => {
    const socket = await openSession();
    act(() =>
      socket.receive({
        type: "step.executed",
        seq: 1,
        data: makeStep(1, {
          actor: "human",
          action_text: "click(x=80, y=100)",
          proposal: { thought: "m", action_text: "click(x=80, y=100)" },
          correction: "same",
          rejections: [
            {
              attempt: 1, thought: "the logo", action: { name: "click", args: { x: 1, y: 1 } }, action_text: "click(x=1, y=1)",
              void_reason: "", reason: "that is the logo", action_format: "loupe", repeated: false, rejected_by: "ann",
              created_at: null,
            },
          ],
        }),
      }),
    );
    const items = screen.getByTestId("step-timeline").querySelectorAll("li");
    expect(items[1].querySelector("[data-testid=timeline-proposal]")).toBeNull();
    expect(items[1].querySelector("[data-testid=timeline-same]")?.textContent).toBe("took over; did what the model proposed");
    expect(items[1].querySelector("[data-testid=timeline-rejections]")?.textContent).toBe("1 rejected");
    expect(screen.queryByTestId("step-proposal")).toBeNull();
    expect(screen.getByTestId("step-same").textContent).toBe(
      "A person acted, and did what the model had proposed (click(x=80, y=100)): no correction.",
    );
    expect(screen.getByTestId("step-rejection").textContent).toContain("click(x=1, y=1) — “that is the logo” (ann), proposal 1");
  });
});
