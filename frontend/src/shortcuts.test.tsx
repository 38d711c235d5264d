/**
 * The live session page and the replay page take their keys and their hints from the one table in
 * components/shortcuts.ts: what the pages show is generated from it, and each key in it does what
 * its row says on its page.
 */
import { render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  REPLAY_SHORTCUTS,
  SESSION_SHORTCUTS,
  SHORTCUTS,
  shortcutFor,
  shortcutHints,
  shortcutLabel,
} from "./components/shortcuts";
import { replayCommand } from "./review/replay";
import { ShortcutsOverlay } from "./session/ShortcutsOverlay";
import { makeStep } from "./test/factories";
import { mockFetch } from "./test/http";
import { renderApp } from "./test/render";
import { baseRoutes, reviewEpisode } from "./test/review";

afterEach(() => vi.unstubAllGlobals());

const body = { tagName: "BODY" } as unknown as EventTarget;
const press = (key: string, shiftKey = false) => ({ key, shiftKey, altKey: false, ctrlKey: false, metaKey: false, target: body });

describe("the one shortcut table", () => {
  it("holds both pages' keys, none answering twice on one page", () => {
    expect(SHORTCUTS).toEqual([...SESSION_SHORTCUTS, ...REPLAY_SHORTCUTS]);
    for (const rows of [SESSION_SHORTCUTS, REPLAY_SHORTCUTS]) {
      const keys = rows.flatMap((s) => s.keys);
      expect(new Set(keys).size).toBe(keys.length);
    }
  });

  it("drives the live session's key handler", () => {
    for (const row of SESSION_SHORTCUTS) {
      for (const key of row.keys) expect(shortcutFor(press(key))?.action).toBe(row.action);
    }
  });

  it("drives the replay's key handler", () => {
    for (const row of REPLAY_SHORTCUTS) {
      for (const chord of row.keys) {
        const shift = chord.startsWith("Shift+");
        const command = replayCommand(press(shift ? chord.slice("Shift+".length) : chord, shift));
        expect(row.action === "grade" ? command : { action: command }).toEqual(
          row.action === "grade" ? { grade: Number(chord) } : { action: row.action },
        );
      }
    }
  });

  it("writes the hints the pages have always shown", () => {
    expect(shortcutHints("replay").map(({ label, hint }) => [label, hint])).toEqual([
      ["← / k", "previous step"],
      ["→ / j", "next step"],
      ["[", "previous episode"],
      ["]", "next episode"],
      ["a / r", "accept / reject"],
      ["1–5", "grade"],
    ]);
    expect(shortcutHints("session").map(({ label }) => label)).toEqual(["A", "E", "R", "Space", "T", "H", "F", "C", "M", "?", "Esc", "Ctrl+Enter"]);
    expect(shortcutHints("session").at(-1)?.hint).toBe("Submit the open form");
  });
});

describe("the hints on the pages come from the table", () => {
  it("live session: the ? overlay lists the session rows", () => {
    render(<ShortcutsOverlay onClose={() => undefined} />);
    const rows = within(screen.getByTestId("shortcuts-overlay"))
      .getAllByRole("row")
      .map((row) => [...row.querySelectorAll("td")].map((cell) => cell.textContent));
    expect(rows).toEqual(shortcutHints("session").map(({ label, hint }) => [label, hint]));
  });

  it("replay: the help line and the buttons' keys are the replay rows", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      "GET /api/v1/episodes/42/": { body: { ...reviewEpisode(42), steps: [makeStep(0)] } },
      "GET /api/v1/episodes/42/transcript": { body: { words: [], clips: [] } },
      "GET /api/v1/episodes/42/reviews/": { body: { results: [] } },
      "GET /api/v1/episodes/42/neighbours": { body: { previous: null, next: null } },
    });
    renderApp("/projects/1/review/42");
    const line = await screen.findByLabelText("Keyboard shortcuts");
    const entries = [...line.querySelectorAll("span")].map((span) => [span.querySelector("kbd")?.textContent, span.textContent]);
    expect(entries).toEqual(shortcutHints("replay").map(({ label, hint }) => [label, `${label} ${hint}`]));
    expect(screen.getByTestId("replay-previous-episode").querySelector("kbd")?.textContent).toBe(shortcutLabel("previous-episode", "replay"));
    expect(screen.getByTestId("replay-next-episode").querySelector("kbd")?.textContent).toBe(shortcutLabel("next-episode", "replay"));
    expect(screen.getByTestId("verdict-accept").querySelector("kbd")?.textContent).toBe(shortcutLabel("accept", "replay"));
    expect(screen.getByTestId("verdict-reject").querySelector("kbd")?.textContent).toBe(shortcutLabel("reject", "replay"));
  });
});
