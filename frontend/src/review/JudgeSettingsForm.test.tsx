import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JudgeSettings } from "../api/judge";
import { mockFetch } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";
import { formOf, judgeChanges, judgeFormProblems } from "./JudgeSettingsForm";

afterEach(() => vi.unstubAllGlobals());

const LIST = "GET /api/v1/episodes/?project=1&status=finished&review_status=unreviewed";
const settings = (extra: Partial<JudgeSettings> = {}): JudgeSettings => ({
  enabled: false, backend: "rule", samples: 1, temperature: 0.7, screenshots: 3, model: "", base_url: "",
  timeout_seconds: null, retries: null, answers: [], ...extra,
});

describe("JudgeSettingsForm", () => {
  it("says what is wrong with each field before anything is sent", () => {
    const form = { ...formOf(settings()), samples: "0", screenshots: "11", temperature: "x", backend: "openai" as const, base_url: "ftp://x" };
    expect(judgeFormProblems(form)).toEqual({
      samples: "Use a whole number from 1 to 15.",
      screenshots: "Use a whole number from 0 to 10.",
      temperature: "Use a number from 0 to 2.",
      model: "The openai judge needs the name of the model the server serves.",
      base_url: "Use an http:// or https:// URL, or leave it empty for LOUPE_OPENAI_BASE_URL.",
    });
    expect(judgeFormProblems({ ...formOf(settings()), samples: "2.5" }).samples).toBe("Use a whole number from 1 to 15.");
    expect(judgeFormProblems(formOf(settings()))).toEqual({});
    expect(judgeChanges({ ...formOf(settings()), samples: "3", enabled: true }, settings())).toEqual({ samples: 3, enabled: true });
  });

  it("a manager sets the judge's backend, votes and screenshots on the Review page, sending only the changes", async () => {
    const { requests } = mockFetch({
      ...baseRoutes("manager"),
      [LIST]: { body: { results: [], next: null, previous: null } },
      "GET /api/v1/projects/1/judge": { body: settings() },
      "PATCH /api/v1/projects/1/judge": (init) => ({ body: settings(JSON.parse(String(init.body))) }),
    });
    renderApp("/projects/1/review");
    fireEvent.click(await screen.findByTestId("judge-settings-toggle"));
    const samples = await screen.findByTestId("judge-samples");
    fireEvent.change(samples, { target: { value: "20" } });
    expect(screen.getByTestId("judge-samples-error").textContent).toBe("Use a whole number from 1 to 15.");
    expect((screen.getByTestId("judge-save") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.change(samples, { target: { value: "5" } });
    fireEvent.change(screen.getByTestId("judge-backend"), { target: { value: "openai" } });
    expect(screen.getByTestId("judge-model-error").textContent).toContain("needs the name of the model");
    fireEvent.change(screen.getByTestId("judge-model"), { target: { value: "qwen-vl" } });
    fireEvent.change(screen.getByTestId("judge-screenshots"), { target: { value: "5" } });
    fireEvent.click(screen.getByTestId("judge-enabled"));
    fireEvent.click(screen.getByTestId("judge-save"));
    await screen.findByTestId("judge-saved");
    expect(requests.find((r) => r.method === "PATCH")?.body).toEqual({
      enabled: true, backend: "openai", samples: 5, screenshots: 5, model: "qwen-vl",
    });
  }, 20_000);

  it("ties each label to its control: the label alone names it, the help and the problem describe it", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      [LIST]: { body: { results: [], next: null, previous: null } },
      "GET /api/v1/projects/1/judge": { body: settings({ backend: "openai", model: "qwen-vl" }) },
    });
    renderApp("/projects/1/review");
    fireEvent.click(await screen.findByTestId("judge-settings-toggle"));
    await screen.findByTestId("judge-samples");
    for (const [label, testId] of [["Judge", "judge-backend"], ["Votes (k)", "judge-samples"], ["Last screenshots", "judge-screenshots"],
      ["Temperature", "judge-temperature"], ["Model", "judge-model"], ["Server (optional)", "judge-base_url"]]) {
      const control = screen.getByLabelText(label, { exact: true });
      expect(control).toBe(screen.getByTestId(testId));
      const label_ = document.querySelector(`label[for="${control.id}"]`);
      expect(label_?.textContent).toBe(label);
    }
    const samples = screen.getByTestId("judge-samples");
    fireEvent.change(samples, { target: { value: "0" } });
    const described = (samples.getAttribute("aria-describedby") ?? "").split(" ").map((id) => document.getElementById(id)?.textContent);
    expect(described).toEqual(["Asked k times; the majority wins, its share is the confidence.", "Use a whole number from 1 to 15."]);
  }, 20_000);

  it("shows the server's refusal beside the field it names", async () => {
    mockFetch({
      ...baseRoutes("manager"),
      [LIST]: { body: { results: [], next: null, previous: null } },
      "GET /api/v1/projects/1/judge": { body: settings() },
      "PATCH /api/v1/projects/1/judge": { status: 400, body: { detail: "'samples': use a whole number from 1 to 15.", errors: { samples: ["use a whole number from 1 to 15."] } } },
    });
    renderApp("/projects/1/review");
    fireEvent.click(await screen.findByTestId("judge-settings-toggle"));
    fireEvent.change(await screen.findByTestId("judge-samples"), { target: { value: "3" } });
    fireEvent.click(screen.getByTestId("judge-save"));
    await waitFor(() => expect(screen.getByTestId("judge-samples-error").textContent).toBe("use a whole number from 1 to 15."));
    expect(screen.getByRole("alert").textContent).toContain("The judge settings were not changed");
  }, 20_000);
});
