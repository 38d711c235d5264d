import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch, type Routes } from "../test/http";
import { renderApp } from "../test/render";
import { baseRoutes } from "../test/review";

afterEach(() => vi.unstubAllGlobals());

function routes(extra: Routes = {}): Routes {
  const base = baseRoutes("manager");
  return {
    ...base,
    "GET /api/v1/projects/1/": { body: { id: 1, slug: "demo", name: "Demo project", description: "", role: "admin", created_at: "" } },
    "GET /api/v1/projects/1/members/": {
      body: { results: [{ id: 1, user: { id: 1, username: "mia" }, role: "admin" }, { id: 2, user: { id: 2, username: "ann" }, role: "annotator" }], next: null },
    },
    ...extra,
  };
}

describe("ProjectPage", () => {
  it("keeps a project name past its limit whole, counts it and does not send it", async () => {
    const { requests } = mockFetch(routes());
    renderApp("/projects/1");
    fireEvent.click(await screen.findByRole("button", { name: "Edit details" }));
    const name = screen.getByTestId("project-name") as HTMLInputElement;
    expect(name.hasAttribute("maxlength")).toBe(false);
    fireEvent.change(name, { target: { value: "p".repeat(250) } });
    expect(name.value.length).toBe(250);
    expect(screen.getByTestId("limit-project_name").textContent).toContain("50 too many");
    expect((screen.getByRole("button", { name: "Save" }) as HTMLButtonElement).disabled).toBe(true);
    expect(requests.some((r) => r.method === "PATCH")).toBe(false);
  });

  it("says why a role change was refused under that member's row, not above the table", async () => {
    mockFetch(routes({
      "PATCH /api/v1/projects/1/members/1/": { status: 409, body: { detail: "This is the project's last admin; make someone else admin first." } },
    }));
    renderApp("/projects/1?tab=members");
    const select = await screen.findByLabelText("Role of mia");
    fireEvent.change(select, { target: { value: "manager" } });
    const error = await screen.findByTestId("member-error");
    expect(error.previousElementSibling?.contains(select)).toBe(true);
    expect(error.textContent).toContain("last admin");
    await waitFor(() => expect(screen.getAllByTestId("member-error")).toHaveLength(1));
  });
});
