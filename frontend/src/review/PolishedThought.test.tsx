import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeStep } from "../test/factories";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes, reviewEpisode } from "../test/review";
import type { EpisodePolish, StepPolish } from "../api/polish";
import type { Transcript } from "../api/audio";
import type { ReplayEpisode } from "../api/review";

afterEach(() => vi.unstubAllGlobals());

const SPOKEN = "um so the the submit button is uh at the bottom";

function episode(): ReplayEpisode {
  return {
    ...reviewEpisode(42, { mode: "supervised" }),
    last_seq: 0,
    steps: [
      { ...makeStep(0, { actor: "human", thought: "", human_thought: SPOKEN }), proposal: null, episode: 42 } as ReplayEpisode["steps"][0],
      { ...makeStep(1, { actor: "edited", human_thought: "um uh" }), proposal: null, episode: 42 } as ReplayEpisode["steps"][0],
    ],
  };
}

const transcript: Transcript = {
  clips: [
    { id: 9, episode: 42, client_id: "c1", content_type: "audio/webm", started_at: 1000, origin: 1000, committed_until: 20, finished: true, chunks: 1, transcribed_chunks: 1 },
  ],
  words: SPOKEN.split(" ").map((word, i) => ({ word, start: 1001 + i / 4, end: 1001.2 + i / 4, probability: 0.9, step: 0, clip: 9, username: "ann" })),
};

function stepPolish(index: number, extra: Partial<StepPolish> = {}): StepPolish {
  return {
    index,
    words: SPOKEN,
    polished_thought: "The submit button is at the bottom.",
    polish_state: "done",
    polish_error: "",
    polished_at: "2026-01-01T00:00:00Z",
    stale: false,
    can_edit: true,
    ...extra,
  };
}

function polish(first: Partial<StepPolish> = {}): EpisodePolish {
  return {
    episode: 42,
    progress: { steps_with_words: 2, done: 1, edited: 0, queued: 0, failed: 1, not_polished: 0 },
    can_request: true,
    settings: { backend: "cleanup", enabled: true },
    steps: [
      stepPolish(0, first),
      stepPolish(1, { words: "um uh", polished_thought: "", polish_state: "failed", polish_error: "only filler words were said ('um uh'): there is no thought to write" }),
    ],
  };
}

function routes(extra: Routes = {}): Routes {
  return {
    ...baseRoutes("manager"),
    "GET /api/v1/episodes/42/": { body: episode() },
    "GET /api/v1/episodes/42/transcript": { body: transcript },
    "GET /api/v1/episodes/42/reviews/": { body: { results: [] } },
    "GET /api/v1/episodes/42/judgements/": { body: { results: [] } },
    "GET /api/v1/episodes/42/neighbours": { body: { previous: null, next: null } },
    "GET /api/v1/episodes/42/branch": { body: { results: [] } },
    ...extra,
  };
}

describe("the polished thought on the replay's step panel", () => {
  it("shows the spoken words beside the polished thought, and an edit is sent and shown once saved", async () => {
    let saved: Partial<StepPolish> = {};
    const { requests } = mockFetch(
      routes({
        "GET /api/v1/episodes/42/polish": () => ({ body: polish(saved) }),
        "PATCH /api/v1/episodes/42/steps/0/polish": (init) => {
          saved = { polished_thought: JSON.parse(String(init.body)).polished_thought, polish_state: "edited" };
          return { body: stepPolish(0, saved) };
        },
      }),
    );
    renderApp("/projects/1/review/42");
    expect((await screen.findByTestId("spoken-words")).textContent).toBe(`“${SPOKEN}”`);
    expect((await screen.findByTestId("polished-text")).textContent).toBe("The submit button is at the bottom.");
    expect(screen.getByTestId("polish-state").textContent).toBe("written from the words");
    expect(screen.getByTestId("polish-progress").textContent).toContain("1 of 2 written · 1 failed");

    fireEvent.click(screen.getByTestId("polish-edit"));
    const box = screen.getByTestId("polish-textarea") as HTMLTextAreaElement;
    expect(box.value).toBe("The submit button is at the bottom.");
    fireEvent.change(box, { target: { value: "I press submit, at the bottom." } });
    fireEvent.keyDown(box, { key: "ArrowRight" }); // typing: the replay stays on this step
    expect(screen.getByTestId("replay-current").getAttribute("data-index")).toBe("0");
    fireEvent.click(screen.getByTestId("polish-save"));

    await waitFor(() => expect(screen.getByTestId("polished-text").textContent).toBe("I press submit, at the bottom."));
    expect(screen.getByTestId("polish-state").textContent).toBe("edited by a person");
    expect(requests.find((r) => r.method === "PATCH")?.body).toEqual({ polished_thought: "I press submit, at the bottom." });
    expect(screen.getByTestId("spoken-words").textContent).toBe(`“${SPOKEN}”`); // the raw words stay
  });

  it("says an approved model step trains on the model's thought until a person edits the polished one", async () => {
    const approved = episode();
    approved.steps[0] = { ...approved.steps[0], actor: "model", thought: "the submit button is at the bottom" };
    mockFetch(routes({ "GET /api/v1/episodes/42/": { body: approved }, "GET /api/v1/episodes/42/polish": { body: polish() } }));
    renderApp("/projects/1/review/42");
    expect((await screen.findByTestId("polish-used")).textContent).toContain("training rows keep the model's thought");
  });

  it("says why a polish failed, and shows a refused edit as the server says it", async () => {
    mockFetch(
      routes({
        "GET /api/v1/episodes/42/polish": { body: polish() },
        "PATCH /api/v1/episodes/42/steps/1/polish": {
          status: 403,
          body: { detail: "Only the project's managers and the annotator who worked on this step may change its polished thought." },
        },
      }),
    );
    renderApp("/projects/1/review/42");
    await screen.findByTestId("polished-text");
    fireEvent.keyDown(window, { key: "ArrowRight" });
    expect((await screen.findByTestId("polish-error")).textContent).toContain("only filler words were said");
    fireEvent.click(screen.getByTestId("polish-edit"));
    const box = screen.getByTestId("polish-textarea");
    fireEvent.change(box, { target: { value: "x".repeat(1001) } });
    expect(screen.getByTestId("polish-too-long").textContent).toContain("this is 1001");
    expect((screen.getByTestId("polish-save") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(box, { target: { value: "I look for the button." } });
    fireEvent.keyDown(box, { key: "Enter", ctrlKey: true });
    expect((await screen.findByRole("alert")).textContent).toContain("annotator who worked on this step");
  });

  it("asks for a polish again once, and waits while the step is being written", async () => {
    let queued = false;
    const { requests } = mockFetch(
      routes({
        "GET /api/v1/episodes/42/polish": () => ({
          body: queued
            ? {
                ...polish({ polish_state: "queued", polished_thought: "", polished_at: new Date().toISOString() }),
                progress: { ...polish().progress, done: 0, queued: 1 },
              }
            : polish(),
        }),
        "POST /api/v1/episodes/42/steps/0/polish": () => {
          queued = true;
          return { status: 202, body: { ...stepPolish(0, { polish_state: "queued" }), queued_now: true } };
        },
      }),
    );
    renderApp("/projects/1/review/42");
    fireEvent.click(await screen.findByTestId("polish-again"));
    expect(await screen.findByTestId("polish-waiting")).toBeTruthy();
    expect((screen.getByTestId("polish-again") as HTMLButtonElement).disabled).toBe(true);
    expect(requests.filter((r) => r.method === "POST")).toHaveLength(1);
    expect(screen.getByTestId("polish-progress").textContent).toContain("1 being written");
  });
});
