/**
 * The one HTTP client for Loupe's REST API (`/api/v1/`, same origin, session cookie + CSRF). The calls themselves
 * live in one module a topic (projects.ts, episodes.ts, review.ts, ...), each with its query keys and its records.
 *
 * Every failure becomes an `ApiError` that carries what the server said (`detail`, field
 * `errors`) so pages can show it to the person as is; nothing here swallows an error.
 */

export const API_ROOT = "/api/v1";

export type FieldErrors = Record<string, string[]>;

/** Why a request failed: `http` (the server answered non-2xx) or `network` (no answer at all). */
export type ApiErrorKind = "http" | "network";

export class ApiError extends Error {
  readonly kind: ApiErrorKind;
  /** HTTP status; 0 for a network failure. */
  readonly status: number;
  /** The message a person can act on (the server's `detail`, or ours when it sent none). */
  readonly detail: string;
  /** Validation errors by field name, empty when there are none. */
  readonly fieldErrors: FieldErrors;
  /** The parsed JSON body, for callers that need more than `detail` (health's 503 body). */
  readonly body: unknown;

  constructor(opts: {
    kind: ApiErrorKind;
    status: number;
    detail: string;
    fieldErrors?: FieldErrors;
    body?: unknown;
  }) {
    super(opts.detail);
    this.name = "ApiError";
    this.kind = opts.kind;
    this.status = opts.status;
    this.detail = opts.detail;
    this.fieldErrors = opts.fieldErrors ?? {};
    this.body = opts.body;
  }

  get isNetwork(): boolean {
    return this.kind === "network";
  }
}

export const NETWORK_ERROR_DETAIL =
  "Could not reach the Loupe server. Check your connection or whether the server is running, then try again.";

/** Read one cookie by name (Django's `csrftoken`). */
export function getCookie(name: string): string | null {
  for (const part of document.cookie ? document.cookie.split(";") : []) {
    const [rawKey, ...rest] = part.trim().split("=");
    if (rawKey === name) return decodeURIComponent(rest.join("="));
  }
  return null;
}

function fallbackDetail(status: number, statusText: string): string {
  if (status === 401) return "You are not logged in.";
  if (status === 403) return "You are not allowed to do this.";
  if (status === 404) return "Not found: it may have been deleted, or the link is wrong.";
  if (status === 429) return "Too many requests. Wait a minute and try again.";
  if (status >= 500) return `The server had a problem (${status}). Try again; if it persists, check the server log.`;
  return `Request failed (${status}${statusText ? ` ${statusText}` : ""}).`;
}

function normaliseFieldErrors(raw: unknown): FieldErrors {
  if (!raw || typeof raw !== "object") return {};
  const out: FieldErrors = {};
  for (const [field, value] of Object.entries(raw as Record<string, unknown>)) {
    if (Array.isArray(value)) out[field] = value.map(String);
    else if (value != null) out[field] = [String(value)];
  }
  return out;
}

/** Turn a non-2xx response into an ApiError, using the JSON body when there is one. */
export async function errorFromResponse(response: Response): Promise<ApiError> {
  let body: unknown = undefined;
  try {
    const text = await response.text();
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined; // Not JSON (a proxy's HTML error page): fall back to our own text.
  }
  const record = body && typeof body === "object" ? (body as Record<string, unknown>) : {};
  const detail =
    typeof record.detail === "string" && record.detail
      ? record.detail
      : fallbackDetail(response.status, response.statusText);
  return new ApiError({
    kind: "http",
    status: response.status,
    detail,
    fieldErrors: normaliseFieldErrors(record.errors),
    body,
  });
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PATCH" | "PUT" | "DELETE";
  /** A JSON body (sent as `application/json`). */
  body?: unknown;
  /** Bytes sent as they are (an audio chunk; a form with files, whose Content-Type the browser sets), instead of
   * `body`; name other raw bodies' Content-Type in `headers`. */
  rawBody?: Blob | ArrayBuffer | string | FormData;
  /** Headers of this request besides Accept and CSRF (a raw body's Content-Type, X-Chunk-Start). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/**
 * Fetch `path` (relative to the API root, or an absolute `next` URL) and return its JSON.
 * Non-GET requests carry Django's CSRF header from the `csrftoken` cookie.
 */
export async function apiFetch<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const method = options.method ?? "GET";
  const headers: Record<string, string> = { Accept: "application/json" };
  if (options.body !== undefined && options.rawBody === undefined) headers["Content-Type"] = "application/json";
  Object.assign(headers, options.headers);
  if (method !== "GET") {
    const token = getCookie("csrftoken");
    if (token) headers["X-CSRFToken"] = token;
  }
  const url = /^https?:\/\//.test(path) || path.startsWith("/") ? path : `${API_ROOT}/${path}`;

  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers,
      credentials: "same-origin",
      body: options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
      signal: options.signal,
    });
  } catch (cause) {
    if (cause instanceof DOMException && cause.name === "AbortError") throw cause;
    throw new ApiError({ kind: "network", status: 0, detail: NETWORK_ERROR_DETAIL });
  }

  if (!response.ok) throw await errorFromResponse(response);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A page of a list: its items and the URL of the next page (null on the last). */
export interface Page<T> {
  results: T[];
  next: string | null;
}

/** Follow `next` links until the list ends; for the small lists (projects, members, tasks). */
export async function fetchAll<T>(path: string, signal?: AbortSignal, maxPages = 50): Promise<T[]> {
  const items: T[] = [];
  let next: string | null = path;
  for (let page = 0; next && page < maxPages; page += 1) {
    const data: Page<T> = await apiFetch<Page<T>>(next, { signal });
    items.push(...data.results);
    next = data.next;
  }
  return items;
}

/** `?a=1&b=2` of the parameters that have a value ("" when none has). */
export function queryString(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}
