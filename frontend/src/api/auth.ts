/** The browser's session (`auth/session`): who is logged in, logging in and out. */
import { ApiError, apiFetch, getCookie } from "./client";
import type { Schemas } from "./types";

export type User = Schemas["UserOutput"];

export const sessionKeys = {
  /** Who is logged in (null when no one is). */
  current: () => ["session"] as const,
};

/** The logged-in user, or null when the server says 401 (any other failure is thrown). */
export async function sessionGet(signal?: AbortSignal): Promise<User | null> {
  try {
    const data = await apiFetch<{ user: User }>("auth/session", { signal });
    return data.user;
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return null;
    throw error;
  }
}

/** Log in; first makes sure the CSRF cookie exists (a GET of the session sets it). */
export async function sessionLogin(username: string, password: string): Promise<User> {
  if (!getCookie("csrftoken")) await sessionGet();
  const data = await apiFetch<{ user: User }>("auth/session", {
    method: "POST",
    body: { username, password },
  });
  return data.user;
}

export async function sessionLogout(): Promise<void> {
  await apiFetch<void>("auth/session", { method: "DELETE" });
}
