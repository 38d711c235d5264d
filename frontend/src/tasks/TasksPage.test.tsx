import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { TaskSpec } from "../api/tasks";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";

afterEach(() => vi.unstubAllGlobals());

const task = (extra: Partial<TaskSpec> = {}): TaskSpec => ({
  id: 5, env_kind: "webapp", task_name: "team-settings", instruction_template: "Turn notifications off.", seed_start: 0,
  seed_end: 9, split: "train", max_steps: 30, definition: null, source: "authored", ...extra,
});

function routes(tasks: TaskSpec[], extra: Routes = {}): Routes {
  return {
    ...baseRoutes("manager"),
    "GET /api/v1/projects/1/tasks/": { body: { results: tasks, next: null } },
    "GET /api/v1/tasks/catalogue": { body: { kinds: [{ kind: "miniwob", format: null, tasks: [], error: "" }] } },
    "GET /api/v1/projects/1/tasks/files": { body: { results: [] } },
    ...extra,
  };
}

async function openAnyUrlEditor() {
  fireEvent.click(await screen.findByTestId("task-new"));
  fireEvent.click(screen.getByTestId("editor-any_url"));
}

const fieldOf = (testId: string) => screen.getByTestId(testId).closest(".field") as HTMLElement;

const needed = (stored: boolean) => ({
  task: 7, task_name: "calc-sales", split: "train", missing: stored ? 0 : 1,
  files: [{
    url: "https://drive.example.com/download?id=1", path: "/home/user/SalesRep.xlsx", name: "SalesRep.xlsx",
    where: "config step 1 (download)",
    stored: stored ? { id: 3, name: "SalesRep.xlsx", size: 2048, sha256: "ab", path: "", created_at: null } : null,
  }],
});

describe("TasksPage", () => {
  it("lists each task's missing files and uploads one for its URL, then shows it stored", async () => {
    let uploaded = false;
    const { fn } = mockFetch(routes([], {
      "GET /api/v1/projects/1/tasks/files": () => ({ body: { results: [needed(uploaded)] } }),
      "POST /api/v1/projects/1/tasks/files": () => {
        uploaded = true;
        return { status: 201, body: needed(true).files[0].stored };
      },
    }));
    renderApp("/projects/1/tasks");
    const row = await screen.findByTestId("task-file");
    expect(row.getAttribute("data-missing")).toBe("yes");
    expect(screen.getByTestId("task-files").textContent).toContain("1 missing");
    const file = new File(["xlsx"], "SalesRep.xlsx");
    fireEvent.change(screen.getByTestId("task-file-upload"), { target: { files: [file] } });
    await waitFor(() => expect(screen.getByTestId("task-file").getAttribute("data-missing")).toBe("no"));
    const post = fn.mock.calls.find(([, init]) => (init as RequestInit | undefined)?.method === "POST");
    const form = (post?.[1] as RequestInit).body as FormData;
    expect(form.get("url")).toBe("https://drive.example.com/download?id=1");
    expect((form.get("file") as File).name).toBe("SalesRep.xlsx");
    expect(screen.getByTestId("task-files").textContent).toContain("All are here.");
  });

  it("shows no task files section when no task downloads a file", async () => {
    mockFetch(routes([task()]));
    renderApp("/projects/1/tasks");
    await screen.findByTestId("task-row");
    expect(screen.queryByTestId("task-files")).toBeNull();
  });

  it("refuses a task id that is not a slug beside the field, before anything is sent, and clears it once fixed", async () => {
    const { requests } = mockFetch(routes([]));
    renderApp("/projects/1/tasks");
    await openAnyUrlEditor();
    for (const bad of ["<script>alert(1)</script>", "новая задача <script>"]) {
      fireEvent.change(screen.getByTestId("anyurl-id"), { target: { value: bad } });
      expect(within(fieldOf("anyurl-id")).getByText(/may hold only lowercase letters a-z, digits, '-' and '_'/)).toBeTruthy();
      expect(screen.getByTestId("anyurl-id").getAttribute("aria-invalid")).toBe("true");
    }
    fireEvent.change(screen.getByTestId("anyurl-instruction"), { target: { value: "Open the settings." } });
    fireEvent.change(screen.getByTestId("anyurl-check-url"), { target: { value: "http://x/settings" } });
    fireEvent.submit(screen.getByTestId("task-editor"));
    expect(requests.some((r) => r.method === "POST")).toBe(false);
    fireEvent.change(screen.getByTestId("anyurl-id"), { target: { value: "team-settings" } });
    expect(fieldOf("anyurl-id").querySelector(".field-error")).toBeNull();
  });

  it("keeps a 200,000-character instruction whole, counts it and refuses it at the field", async () => {
    const { requests } = mockFetch(routes([]));
    renderApp("/projects/1/tasks");
    await openAnyUrlEditor();
    const huge = "Turn it off. ".repeat(16_000).trim();
    fireEvent.change(screen.getByTestId("anyurl-instruction"), { target: { value: huge } });
    expect((screen.getByTestId("anyurl-instruction") as HTMLTextAreaElement).value).toBe(huge); // nothing cut
    expect(screen.getByTestId("limit-task_instruction").textContent).toContain("207,999 / 4,000 characters");
    expect(within(fieldOf("anyurl-instruction")).getByText(/The instruction is 207,999 characters long; the limit is 4,000/)).toBeTruthy();
    fireEvent.change(screen.getByTestId("anyurl-id"), { target: { value: "team-settings" } });
    fireEvent.submit(screen.getByTestId("task-editor"));
    expect(requests.some((r) => r.method === "POST")).toBe(false);
  });

  it("starts the any-URL address at this server's own origin, not a fixed port", async () => {
    mockFetch(routes([]));
    renderApp("/projects/1/tasks");
    await openAnyUrlEditor();
    expect((screen.getByTestId("anyurl-start") as HTMLInputElement).value).toBe(`${window.location.origin}/`);
    expect(window.location.origin).not.toContain(":8000");
  });

  it("shows each of the server's problems beside its own field, none twice, each gone once that field changes", async () => {
    const problems = {
      definition: [
        "The task id 'Team' may hold only lowercase letters a-z, digits, '-' and '_', starting with a letter or a digit (like settings-notifications-off).",
        "task 'Team': start_url 'intranet' is not a web address: it must start with http:// or https://",
      ],
      seed_end: ["The seed range ends before it starts."],
    };
    mockFetch(routes([], {
      "POST /api/v1/projects/1/tasks/": { status: 400, body: { detail: "3 problems; nothing was saved: ...", errors: problems } },
    }));
    renderApp("/projects/1/tasks");
    await openAnyUrlEditor();
    // the page's own check is skipped here by an id it accepts; the server answers with three problems
    fireEvent.change(screen.getByTestId("anyurl-id"), { target: { value: "team" } });
    fireEvent.change(screen.getByTestId("anyurl-instruction"), { target: { value: "Open it." } });
    fireEvent.change(screen.getByTestId("anyurl-check-url"), { target: { value: "http://x/" } });
    fireEvent.submit(screen.getByTestId("task-editor"));
    await waitFor(() => expect(fieldOf("anyurl-start").querySelector(".field-error")?.textContent).toContain("is not a web address"));
    expect(fieldOf("anyurl-id").querySelector(".field-error")?.textContent).toContain("may hold only");
    const lastSeed = screen.getByLabelText("Last seed").closest(".field") as HTMLElement;
    expect(lastSeed.querySelector(".field-error")?.textContent).toBe("The seed range ends before it starts.");
    const banner = screen.getByTestId("error-banner");
    expect(banner.textContent).toContain("the messages beside the fields say what to change");
    expect(banner.textContent).not.toContain("is not a web address");
    // the banner sits by the button that sent the form
    expect(banner.nextElementSibling?.contains(screen.getByTestId("task-save"))).toBe(true);
    fireEvent.change(screen.getByTestId("anyurl-start"), { target: { value: "http://127.0.0.1:9000/" } });
    expect(fieldOf("anyurl-start").querySelector(".field-error")).toBeNull();
    expect(fieldOf("anyurl-id").querySelector(".field-error")).not.toBeNull(); // not changed: still said
  });

  it("says why Try it was refused in the task's row, beside the button", async () => {
    const refusal = "This project's deployed checkpoint is the scripted baseline: it has no steps for your own tasks.";
    mockFetch(routes([task(), task({ id: 6, task_name: "other-task" })], {
      "POST /api/v1/projects/1/episodes/": { status: 409, body: { detail: refusal } },
    }));
    renderApp("/projects/1/tasks");
    const rows = await screen.findAllByTestId("task-row");
    fireEvent.click(within(rows[1]).getByTestId("task-try"));
    const error = await screen.findByTestId("task-row-error");
    expect(error.getAttribute("data-task")).toBe("other-task");
    expect(error.previousElementSibling).toBe(rows[1]); // right under the row whose button was clicked
    expect(error.textContent).toContain(refusal);
  });

  it("clamps a long instruction in the table instead of letting it push the buttons away", async () => {
    mockFetch(routes([task({ instruction_template: "x".repeat(4000) })]));
    renderApp("/projects/1/tasks");
    const row = await screen.findByTestId("task-row");
    expect(row.querySelector(".task-instruction")).not.toBeNull();
    expect(row.querySelector(".task-cell")).not.toBeNull();
  });
});
