/**
 * A fake `fetch` for tests: routes by "METHOD path" to canned JSON responses, and records
 * every request so a test can check what the client sent.
 */
import { vi } from "vitest";

export interface Reply {
  status?: number;
  body?: unknown;
  /** Simulate no answer at all (server down, DNS, CORS). */
  networkError?: boolean;
}

export type Routes = Record<string, Reply | ((init: RequestInit) => Reply)>;

export interface RecordedRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
  credentials?: RequestCredentials;
}

export function mockFetch(routes: Routes) {
  const requests: RecordedRequest[] = [];
  const fn = vi.fn(async (input: RequestInfo | URL, init: RequestInit = {}) => {
    const url = String(input);
    const method = (init.method ?? "GET").toUpperCase();
    const path = url.replace(/^https?:\/\/[^/]+/, "");
    requests.push({
      method,
      url: path,
      headers: { ...(init.headers as Record<string, string>) },
      body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
      credentials: init.credentials,
    });
    const route = routes[`${method} ${path}`] ?? routes[`${method} ${path.split("?")[0]}`];
    if (!route) return new Response(JSON.stringify({ detail: `No mock for ${method} ${path}` }), { status: 500 });
    const reply = typeof route === "function" ? route(init) : route;
    if (reply.networkError) throw new TypeError("Failed to fetch");
    const status = reply.status ?? 200;
    return new Response(status === 204 || reply.body === undefined ? null : JSON.stringify(reply.body), {
      status,
      headers: { "Content-Type": "application/json" },
    });
  });
  vi.stubGlobal("fetch", fn);
  return { fn, requests };
}
