import { act, fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeStep } from "../test/factories";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes, reviewEpisode } from "../test/review";
import type { Rejection } from "../api/episodes";
import type { Transcript } from "../api/audio";
import type { ReplayEpisode, Review } from "../api/review";

afterEach(() => vi.unstubAllGlobals());

const at = (seconds: number) => new Date(seconds * 1000).toISOString();

/** The silent element the replay asks a recording's length with (review/clipLength.ts), driven by hand. */
class FakeAudio extends EventTarget {
  static made: FakeAudio[] = [];
  duration = NaN;
  currentTime = 0;
  preload = "";
  muted = false;
  src = "";
  constructor() {
    super();
    FakeAudio.made.push(this);
  }
  removeAttribute(name: string) {
    if (name === "src") this.src = "";
  }
}

function episode(): ReplayEpisode {
  return {
    ...reviewEpisode(42, { n_interventions: 1, n_void: 1, mode: "supervised" }),
    last_seq: 0,
    steps: [
      { ...makeStep(0), created_at: at(1010) },
      {
        ...makeStep(1, { actor: "edited", thought: "the OK button is lower", action: { name: "click", args: { x: 8, y: 12 } }, action_text: "" }),
        proposal: { thought: "click cancel", action: { name: "click", args: { x: 2, y: 2 } }, raw: "Thought: click cancel\nAction: click(x=2, y=2)" },
        human_thought: "it should be the lower one",
        created_at: at(1020),
      },
      { ...makeStep(2, { action: null, action_text: "", thought: "", void: true, void_reason: "no action line" }), created_at: at(1030) },
    ],
  };
}

const transcript: Transcript = {
  clips: [
    { id: 9, episode: 42, client_id: "c1", content_type: "audio/webm", started_at: 1000, origin: 1000, committed_until: 20, finished: true, chunks: 2, transcribed_chunks: 2 },
  ],
  words: [
    { word: "looks", start: 1002, end: 1002.5, probability: 0.9, step: 0, clip: 9, username: "ann" },
    { word: "lower", start: 1015, end: 1015.5, probability: 0.9, step: 1, clip: 9, username: "ann" },
  ],
};

const bob: Review = {
  id: 3,
  episode: 42,
  reviewer: { id: 5, username: "bob" },
  verdict: "reject",
  grade: 2,
  step_labels: {},
  comment: "wrong button first",
  created_at: at(1100),
  updated_at: at(1100),
};

const LIST = "project=1&status=finished&review_status=unreviewed";

function routes(extra: Routes = {}): Routes {
  return {
    ...baseRoutes("manager"),
    "GET /api/v1/episodes/42/": { body: episode() },
    "GET /api/v1/episodes/42/transcript": { body: transcript },
    "GET /api/v1/episodes/42/reviews/": { body: { results: [bob] } },
    "GET /api/v1/episodes/42/judgements/": { body: { results: [] } },
    [`GET /api/v1/episodes/42/neighbours?${LIST}`]: { body: { previous: 43, next: 41 } },
    ...extra,
  };
}

const current = () => screen.getByTestId("replay-current").getAttribute("data-index");
const press = (key: string, target: Element | Window = window) => fireEvent.keyDown(target, { key });

describe("ReplayPage", () => {
  it("steps through with the keyboard: proposal beside the correction, void turns marked, labels kept per step", async () => {
    mockFetch(routes());
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    expect(current()).toBe("0");
    expect(screen.getAllByTestId("replay-step")).toHaveLength(3);
    expect(screen.getByTestId("replay-actor").textContent).toBe("model");

    press("ArrowRight");
    expect(current()).toBe("1");
    expect(screen.getByTestId("replay-actor").textContent).toBe("edited");
    expect(screen.getByTestId("replay-proposal").textContent).toContain("click(x=2, y=2)");
    expect(screen.getByTestId("replay-proposal").textContent).toContain("click cancel");
    expect(screen.getByTestId("replay-correction").textContent).toContain("click(x=8, y=12)");
    expect(screen.getByTestId("replay-human-thought").textContent).toContain("it should be the lower one");
    const label = screen.getByTestId("step-label");
    fireEvent.change(label, { target: { value: "good" } });
    press("ArrowRight", label); // from the drop-down: still moves on
    expect(current()).toBe("2");
    expect(screen.getByTestId("replay-void").textContent).toContain("no action line");
    expect((screen.getByTestId("step-label") as HTMLSelectElement).value).toBe("");
    press("j");
    expect(current()).toBe("2"); // the last step
    press("k");
    expect(current()).toBe("1");
    expect((screen.getByTestId("step-label") as HTMLSelectElement).value).toBe("good");
    press("Home");
    expect(current()).toBe("0");
  });

  it("submits verdict, grade, labels and comment, then shows the result and the other reviewers' verdicts", async () => {
    const { requests } = mockFetch(
      routes({
        "PUT /api/v1/episodes/42/review": {
          body: {
            id: 8, episode: 42, reviewer: { id: 1, username: "mia" }, verdict: "accept", grade: 4,
            step_labels: { "1": "good" }, comment: "fine", created_at: at(1200), updated_at: at(1200),
            review_status: "disputed", review_summary: { reviews: 2, accepts: 1, rejects: 1, grade_mean: 3 },
          },
        },
      }),
    );
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    // Before one's own verdict is in, the others' are not shown.
    expect(screen.getByTestId("other-reviews").textContent).toContain("1 other review");
    expect(screen.queryByText("wrong button first")).toBeNull();
    expect((screen.getByTestId("review-submit") as HTMLButtonElement).disabled).toBe(true);

    press("ArrowRight");
    fireEvent.change(screen.getByTestId("step-label"), { target: { value: "good" } });
    press("a");
    press("4");
    const comment = screen.getByTestId("review-comment");
    fireEvent.change(comment, { target: { value: "fine" } });
    press("ArrowLeft", comment); // typing: the step stays
    expect(current()).toBe("1");
    expect(screen.getByTestId("grade-4").getAttribute("aria-pressed")).toBe("true");
    fireEvent.keyDown(comment, { key: "Enter", ctrlKey: true }); // submits from the comment box

    expect((await screen.findByTestId("review-saved")).textContent).toContain("accepted this episode with grade 4");
    expect(requests.find((r) => r.method === "PUT")?.body).toEqual({ verdict: "accept", grade: 4, comment: "fine", step_labels: { "1": "good" } });
    expect(screen.getByTestId("review-status").textContent).toBe("disputed");
    await waitFor(() => expect(screen.getByTestId("other-review").textContent).toContain("wrong button first"));
    expect(screen.getByTestId("review-submit").textContent).toBe("Update review");
  });

  it("starts from the reviewer's earlier review, and shows a refusal as the server says it", async () => {
    const mine: Review = { ...bob, id: 4, reviewer: { id: 1, username: "mia" }, verdict: "accept", grade: 5, step_labels: { "2": "wasteful" }, comment: "before" };
    mockFetch(
      routes({
        "GET /api/v1/episodes/42/reviews/": { body: { results: [mine] } },
        "PUT /api/v1/episodes/42/review": { status: 409, body: { detail: "Episode 42 is running; review it once it has finished." } },
      }),
    );
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    expect(screen.getByTestId("verdict-accept").getAttribute("aria-pressed")).toBe("true");
    expect((screen.getByTestId("review-comment") as HTMLTextAreaElement).value).toBe("before");
    expect(screen.getByTestId("review-labels").textContent).toContain("step 3: wasteful");
    fireEvent.click(screen.getByTestId("review-submit"));
    expect((await screen.findByRole("alert")).textContent).toContain("review it once it has finished");
  });

  it("says why the episode ended in plain words", async () => {
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: { ...episode(), end_reason: "supervisor_finish: rejected_too_often" } } }));
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    expect(screen.getByTestId("end-reason").textContent).toBe("A person rejected the model's proposals for one step too many times.");
  });

  it("shows a desktop's wide screen across the page, and a MiniWoB page in its 400-pixel column", async () => {
    const wide = episode();
    wide.steps = wide.steps.map((s) => ({ ...s, width: 1280, height: 720 }));
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: wide } }));
    const { unmount } = renderApp(`/projects/1/review/42?${LIST}`);
    const shot = await screen.findByTestId("replay-screenshot");
    expect(screen.getByTestId("replay").querySelector(".replay-body")?.classList.contains("replay-body-wide")).toBe(true);
    expect((shot.parentElement as HTMLElement).style.width).toBe("");
    unmount();

    mockFetch(routes());
    renderApp(`/projects/1/review/42?${LIST}`);
    const narrow = await screen.findByTestId("replay-screenshot");
    expect(screen.getByTestId("replay").querySelector(".replay-body")?.classList.contains("replay-body-wide")).toBe(false);
    expect((narrow.parentElement as HTMLElement).style.width).toBe("400px");
  });

  it("shows a hybrid episode's shell command with what it printed beside the GUI steps", async () => {
    const hybrid = episode();
    hybrid.steps = [
      hybrid.steps[0],
      { ...makeStep(1, { action: { name: "shell", args: { command: "wc -l notes.txt" } }, action_text: 'shell(command="wc -l notes.txt")' }),
        info: { output: "3 notes.txt\n", exit_code: 0 }, created_at: at(1020) },
    ];
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: hybrid } }));
    renderApp(`/projects/1/review/42?${LIST}`);
    await screen.findByTestId("replay-current");
    expect(screen.queryByTestId("shell-output")).toBeNull(); // a click shows no shell output
    press("ArrowRight");
    await waitFor(() => expect(current()).toBe("1"));
    expect(screen.getByTestId("replay-action").textContent).toContain("wc -l notes.txt");
    expect(screen.getByTestId("shell-output").textContent).toBe("Shell output (exit code 0)3 notes.txt");
  });

  it("does not offer to submit a review of an episode that is still running", async () => {
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: { ...episode(), status: "running" } } }));
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    fireEvent.click(screen.getByTestId("verdict-accept"));
    expect((screen.getByTestId("review-submit") as HTMLButtonElement).disabled).toBe(true);
    expect(screen.getByTestId("review-not-finished").textContent).toContain("has not finished yet");
  });

  it("follows the think-aloud audio: the word said is highlighted and the step view moves with it", async () => {
    mockFetch(routes());
    renderApp("/projects/1/review/42");
    const audio = (await screen.findByTestId("replay-audio")) as HTMLAudioElement;
    expect(audio.getAttribute("src")).toBe("/api/v1/audio/9/file");
    expect(current()).toBe("0");
    audio.currentTime = 15.2; // session time 1015.2: "lower", aligned to step 1
    fireEvent.timeUpdate(audio);
    expect(current()).toBe("1");
    const active = screen.getAllByTestId("transcript-word").filter((w) => w.dataset.active === "true");
    expect(active.map((w) => w.textContent?.trim())).toEqual(["lower"]);
    // Stepping by hand is left alone while the audio stays in the same step...
    press("ArrowRight");
    audio.currentTime = 18;
    fireEvent.timeUpdate(audio);
    expect(current()).toBe("2");
    // Pressing play again brings the view back to the audio's step (1018 s lies in step 1's window).
    fireEvent.play(audio);
    fireEvent.timeUpdate(audio);
    expect(current()).toBe("1");
    // Clicking a word jumps the audio there.
    fireEvent.click(screen.getAllByTestId("transcript-word")[0]);
    expect(audio.currentTime).toBeCloseTo(2, 5);
    expect(current()).toBe("0");
  });

  it("shows a recording's real length, not Infinity, learnt without moving the person's player", async () => {
    vi.stubGlobal("Audio", FakeAudio);
    FakeAudio.made = [];
    mockFetch(routes());
    renderApp("/projects/1/review/42");
    const audio = (await screen.findByTestId("replay-audio")) as HTMLAudioElement;
    // Before anything is known: the transcript bounds the length from below (committed_until 20 s).
    expect(screen.getByTestId("clip-duration").textContent).toBe("at least 0:20");
    // Chromium, for MediaRecorder's WebM: no duration in the file, so Infinity until it has read to the end.
    Object.defineProperty(audio, "duration", { configurable: true, get: () => Infinity });
    fireEvent.durationChange(audio);
    expect(screen.getByTestId("clip-duration").textContent).not.toMatch(/Infinity|NaN/);
    const probe = FakeAudio.made[FakeAudio.made.length - 1];
    expect(probe.src).toBe("/api/v1/audio/9/file");
    probe.duration = Infinity;
    act(() => probe.dispatchEvent(new Event("loadedmetadata")));
    expect(probe.currentTime).toBeGreaterThan(1e9); // the probe, not the person's player, asks for the end
    probe.duration = 21.7;
    act(() => probe.dispatchEvent(new Event("durationchange")));
    expect(screen.getByTestId("clip-duration").textContent).toBe("0:22");
    expect(audio.currentTime).toBe(0);
    expect(current()).toBe("0");
  });

  it("shows the length a browser reports at once, and a dash rather than NaN when nothing is known", async () => {
    vi.stubGlobal("Audio", FakeAudio);
    FakeAudio.made = [];
    mockFetch(routes({ "GET /api/v1/episodes/42/transcript": { body: { ...transcript, words: [], clips: [{ ...transcript.clips[0], committed_until: 0 }] } } }));
    renderApp("/projects/1/review/42");
    const audio = (await screen.findByTestId("replay-audio")) as HTMLAudioElement;
    expect(screen.getByTestId("clip-duration").textContent).toBe("—");
    Object.defineProperty(audio, "duration", { configurable: true, get: () => 65 });
    fireEvent.durationChange(audio);
    expect(screen.getByTestId("clip-duration").textContent).toBe("1:05");
    expect(FakeAudio.made.every((probe) => probe.src === "")).toBe(true); // no probe left fetching
  });

  it("moves to the previous and next episode of the filtered list, keeping the list's query", async () => {
    mockFetch(routes({
      [`GET /api/v1/episodes/42/neighbours?project=1&status=finished&has_void=true&review_status=unreviewed`]: { body: { previous: null, next: 41 } },
    }));
    renderApp("/projects/1/review/42?has_void=true");
    await screen.findByTestId("replay-current");
    await waitFor(() => expect((screen.getByTestId("replay-next-episode") as HTMLButtonElement).disabled).toBe(false));
    expect((screen.getByTestId("replay-previous-episode") as HTMLButtonElement).disabled).toBe(true);
    press("]");
    expect(screen.getByTestId("location").textContent).toBe("/projects/1/review/41?has_void=true");
  });

  it("shows the proposals a person rejected before a step ran, marks repeats, and marks such steps in the strip", async () => {
    const rejection = (attempt: number, extra: Partial<Rejection> = {}): Rejection => ({
      attempt, thought: "the logo is a button", action: { name: "click", args: { x: 1, y: 1 } }, action_text: "",
      void_reason: "", reason: "that is the logo", action_format: "loupe", repeated: false, rejected_by: "ann", created_at: at(1005),
      ...extra,
    });
    const rejected = episode();
    rejected.steps[0] = {
      ...rejected.steps[0],
      rejections: [rejection(1), rejection(2, { reason: "", repeated: true, rejected_by: null, action_text: "click(x=1, y=1)" })],
    };
    rejected.steps[1] = { ...rejected.steps[1], rejections: [] };
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: rejected } }));
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    const list = screen.getByTestId("step-rejections");
    expect(list.textContent).toContain("Rejected before this step ran");
    const items = screen.getAllByTestId("step-rejection");
    expect(items[0].textContent).toContain("click(x=1, y=1) — “that is the logo” (ann), proposal 1");
    expect(items[0].querySelector("[data-testid=rejection-repeated]")).toBeNull();
    expect(items[1].textContent).toContain("click(x=1, y=1) — no reason given, proposal 2");
    expect(items[1].querySelector("[data-testid=rejection-repeated]")?.textContent).toBe("the model repeated a rejected step");

    const thumbs = screen.getAllByTestId("replay-step");
    expect(thumbs[0].className).toContain("has-rejections");
    expect(thumbs[0].querySelector("[data-testid=replay-step-rejected]")?.textContent).toBe("2 rejected");
    expect(thumbs[0].getAttribute("title")).toContain("Rejected before it ran:\nclick(x=1, y=1) — “that is the logo” (ann), proposal 1");
    expect(thumbs[1].className).not.toContain("has-rejections");
    press("ArrowRight");
    expect(screen.queryByTestId("step-rejections")).toBeNull();
  });

  it("shows a takeover that did what the model proposed as no correction", async () => {
    const same = episode();
    same.steps[1] = {
      ...same.steps[1],
      actor: "human",
      correction: "same",
      action: { name: "click", args: { x: 2, y: 2 } },
      thought: "",
      proposal: { thought: "click cancel", action: { name: "click", args: { x: 2, y: 2 } }, action_text: "click(x=2, y=2)" },
    };
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: same } }));
    renderApp("/projects/1/review/42");
    await screen.findByTestId("replay-current");
    press("ArrowRight");
    expect(current()).toBe("1");
    expect(screen.queryByTestId("replay-proposal")).toBeNull();
    expect(screen.queryByTestId("replay-correction")).toBeNull();
    expect(screen.getByTestId("replay-same").textContent).toBe(
      "A person acted, and did what the model had proposed (click(x=2, y=2)): no correction.",
    );
    expect(screen.getByTestId("replay-action").textContent).toBe("click(x=2, y=2)");
    expect(screen.getAllByTestId("replay-step")[1].className).not.toContain("is-corrected");
  });
});
