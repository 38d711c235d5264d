import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch } from "../test/http";
import { sessionGet, sessionLogin } from "./auth";
import { ApiError, apiFetch, fetchAll, NETWORK_ERROR_DETAIL } from "./client";
import { healthGet } from "./health";

afterEach(() => vi.unstubAllGlobals());

describe("apiFetch errors", () => {
  it("turns a JSON error body into an ApiError carrying detail and field errors", async () => {
    mockFetch({
      "POST /api/v1/projects/1/tasks/": {
        status: 400,
        body: { detail: "The task is not valid.", errors: { task_name: ["This field is required."], seed_end: "Must be ≥ seed_start." } },
      },
    });
    const error = (await apiFetch("projects/1/tasks/", { method: "POST", body: {} }).catch((e) => e)) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error.status).toBe(400);
    expect(error.kind).toBe("http");
    expect(error.detail).toBe("The task is not valid.");
    expect(error.message).toBe("The task is not valid.");
    expect(error.fieldErrors).toEqual({
      task_name: ["This field is required."],
      seed_end: ["Must be ≥ seed_start."],
    });
  });

  it("falls back to a message a person can act on when the body is not JSON", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => new Response("<html>Bad gateway</html>", { status: 502 })));
    const error = (await apiFetch("projects/").catch((e) => e)) as ApiError;
    expect(error.status).toBe(502);
    expect(error.detail).toMatch(/server had a problem \(502\)/);
    expect(error.fieldErrors).toEqual({});
  });

  it("reports a network failure as such, with status 0", async () => {
    mockFetch({ "GET /api/v1/projects/": { networkError: true } });
    const error = (await apiFetch("projects/").catch((e) => e)) as ApiError;
    expect(error).toBeInstanceOf(ApiError);
    expect(error.isNetwork).toBe(true);
    expect(error.status).toBe(0);
    expect(error.detail).toBe(NETWORK_ERROR_DETAIL);
  });
});

describe("apiFetch requests", () => {
  it("sends the csrftoken cookie as X-CSRFToken on writes, same-origin credentials always", async () => {
    document.cookie = "csrftoken=tok%3D123";
    const { requests } = mockFetch({
      "PATCH /api/v1/projects/1/": { body: { id: 1 } },
      "GET /api/v1/projects/1/": { body: { id: 1 } },
    });
    await apiFetch("projects/1/", { method: "PATCH", body: { name: "New" } });
    await apiFetch("projects/1/");
    expect(requests[0].headers["X-CSRFToken"]).toBe("tok=123");
    expect(requests[0].body).toEqual({ name: "New" });
    expect(requests[0].credentials).toBe("same-origin");
    expect(requests[1].headers["X-CSRFToken"]).toBeUndefined();
    expect(requests[1].credentials).toBe("same-origin");
  });

  it("returns undefined for 204 No Content", async () => {
    mockFetch({ "DELETE /api/v1/auth/session": { status: 204 } });
    await expect(apiFetch("auth/session", { method: "DELETE" })).resolves.toBeUndefined();
  });

  it("follows next links to the end of a list", async () => {
    mockFetch({
      "GET /api/v1/projects/": { body: { results: [{ id: 1 }], next: "http://testserver/api/v1/projects/?cursor=abc" } },
      "GET /api/v1/projects/?cursor=abc": { body: { results: [{ id: 2 }], next: null } },
    });
    await expect(fetchAll<{ id: number }>("projects/")).resolves.toEqual([{ id: 1 }, { id: 2 }]);
  });
});

describe("session and health", () => {
  it("reads a 401 session as logged out, but throws other failures", async () => {
    mockFetch({ "GET /api/v1/auth/session": { status: 401, body: { detail: "Not logged in." } } });
    await expect(sessionGet()).resolves.toBeNull();
    mockFetch({ "GET /api/v1/auth/session": { status: 500, body: { detail: "Database unavailable." } } });
    await expect(sessionGet()).rejects.toMatchObject({ detail: "Database unavailable." });
  });

  it("fetches the session first when logging in without a CSRF cookie", async () => {
    const { requests } = mockFetch({
      "GET /api/v1/auth/session": () => {
        document.cookie = "csrftoken=fresh";
        return { status: 401, body: { detail: "Not logged in." } };
      },
      "POST /api/v1/auth/session": { body: { user: { id: 1, username: "manager", is_staff: false } } },
    });
    const user = await sessionLogin("manager", "pw");
    expect(user.username).toBe("manager");
    expect(requests.map((r) => r.method)).toEqual(["GET", "POST"]);
    expect(requests[1].headers["X-CSRFToken"]).toBe("fresh");
    expect(requests[1].body).toEqual({ username: "manager", password: "pw" });
  });

  it("reads a 503 health answer with checks as a degraded report", async () => {
    const checks = { database: { ok: true }, celery: { ok: false, error: "no workers" } };
    mockFetch({ "GET /api/v1/health": { status: 503, body: { status: "degraded", checks } } });
    await expect(healthGet()).resolves.toEqual({ status: "degraded", checks });
  });
});
