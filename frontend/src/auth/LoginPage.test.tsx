import { fireEvent, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch, type Reply } from "../test/http";
import { renderApp } from "../test/render";

afterEach(() => vi.unstubAllGlobals());

const loggedOut: Reply = { status: 401, body: { detail: "Not logged in." } };
const manager = { id: 1, username: "manager", is_staff: false };

async function submitLogin(username: string, password: string) {
  fireEvent.change(await screen.findByTestId("login-username"), { target: { value: username } });
  fireEvent.change(screen.getByTestId("login-password"), { target: { value: password } });
  fireEvent.click(screen.getByTestId("login-submit"));
}

describe("LoginPage", () => {
  it("shows the server's text for wrong credentials", async () => {
    document.cookie = "csrftoken=abc";
    const { requests } = mockFetch({
      "GET /api/v1/auth/session": loggedOut,
      "POST /api/v1/auth/session": { status: 401, body: { detail: "Wrong username or password." } },
    });
    renderApp("/login");
    await submitLogin("manager", "nope");
    expect(await screen.findByRole("alert")).toHaveProperty(
      "textContent",
      expect.stringContaining("Wrong username or password."),
    );
    const post = requests.find((r) => r.method === "POST");
    expect(post?.body).toEqual({ username: "manager", password: "nope" });
    expect(post?.headers["X-CSRFToken"]).toBe("abc");
    expect(screen.getByTestId("location").textContent).toBe("/login");
  });

  it("shows the throttling message the server sends on 429", async () => {
    mockFetch({
      "GET /api/v1/auth/session": loggedOut,
      "POST /api/v1/auth/session": { status: 429, body: { detail: "Too many attempts. Try again in 60 seconds." } },
    });
    renderApp("/login");
    await submitLogin("manager", "x");
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("Too many attempts. Try again in 60 seconds.");
  });

  it("says the server is unreachable when the request gets no answer", async () => {
    mockFetch({
      "GET /api/v1/auth/session": loggedOut,
      "POST /api/v1/auth/session": { networkError: true },
    });
    renderApp("/login");
    await submitLogin("manager", "x");
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toMatch(/Could not reach the Loupe server/);
  });

  it("sends an unauthenticated visit to /login and back to the page after logging in", async () => {
    let loggedIn = false;
    mockFetch({
      "GET /api/v1/auth/session": () => (loggedIn ? { body: { user: manager } } : loggedOut),
      "POST /api/v1/auth/session": () => {
        loggedIn = true;
        return { body: { user: manager } };
      },
      "GET /api/v1/projects/": { body: { results: [], next: null } },
      "GET /api/v1/projects/5/": {
        body: { id: 5, slug: "p5", name: "Project Five", description: "", role: "manager", created_at: "2026-01-01T00:00:00Z" },
      },
      "GET /api/v1/projects/5/tasks/": { body: { results: [], next: null } },
      "GET /api/v1/health": { body: { status: "ok", checks: {} } },
    });
    renderApp("/projects/5");
    await waitFor(() => expect(screen.getByTestId("location").textContent).toBe("/login"));
    await submitLogin("manager", "secret");
    await waitFor(() => expect(screen.getByTestId("location").textContent).toBe("/projects/5"));
    expect(await screen.findByRole("heading", { name: "Project Five" })).toBeTruthy();
    expect(screen.getByTestId("current-user").textContent).toContain("manager");
  });
});
