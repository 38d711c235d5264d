/**
 * The one HTTP client for Loupe's REST API (`/api/v1/`, same origin, session cookie + CSRF).
 *
 * Every failure becomes an `ApiError` that carries what the server said (`detail`, field
 * `errors`) so pages can show it to the person as is; nothing here swallows an error.
 */
import type {
  Cycle,
  CycleSettings,
  CycleSettingsInput,
  Deployment,
  Episode,
  EpisodeDetail,
  EpisodeMode,
  Health,
  Member,
  Page,
  Project,
  Role,
  TaskSpec,
  TrainingRun,
  User,
} from "./types";

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

function query(params: Record<string, string | number | undefined | null>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

// --- auth -------------------------------------------------------------------------------

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

// --- projects ---------------------------------------------------------------------------

export const projectList = (signal?: AbortSignal) => fetchAll<Project>("projects/", signal);

export const projectGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Project>(`projects/${projectId}/`, { signal });

export const projectUpdate = (
  projectId: number,
  changes: Partial<Pick<Project, "name" | "description">>,
) => apiFetch<Project>(`projects/${projectId}/`, { method: "PATCH", body: changes });

export const memberList = (projectId: number, signal?: AbortSignal) =>
  fetchAll<Member>(`projects/${projectId}/members/`, signal);

export const memberAdd = (projectId: number, username: string, role: Role) =>
  apiFetch<Member>(`projects/${projectId}/members/`, { method: "POST", body: { username, role } });

export const memberUpdate = (projectId: number, memberId: number, role: Role) =>
  apiFetch<Member>(`projects/${projectId}/members/${memberId}/`, { method: "PATCH", body: { role } });

export const memberRemove = (projectId: number, memberId: number) =>
  apiFetch<void>(`projects/${projectId}/members/${memberId}/`, { method: "DELETE" });

export const taskList = (projectId: number, signal?: AbortSignal) =>
  fetchAll<TaskSpec>(`projects/${projectId}/tasks/`, signal);

export const taskRemove = (projectId: number, taskId: number) =>
  apiFetch<void>(`projects/${projectId}/tasks/${taskId}/`, { method: "DELETE" });

// --- episodes ---------------------------------------------------------------------------

export interface EpisodeFilter {
  project: number;
  status?: string;
  mode?: string;
}

/** One page of episodes; pass the previous page's `next` URL as `pageUrl` to continue. */
export const episodeListPage = (filter: EpisodeFilter, pageUrl?: string | null, signal?: AbortSignal) =>
  apiFetch<Page<Episode>>(pageUrl ?? `episodes/${query({ ...filter })}`, { signal });

export const episodeGet = (episodeId: number, signal?: AbortSignal) =>
  apiFetch<EpisodeDetail>(`episodes/${episodeId}/`, { signal });

export const episodeStart = (
  projectId: number,
  request: { task: number; seeds: number[]; mode: EpisodeMode },
) =>
  apiFetch<{ results: Episode[] }>(`projects/${projectId}/episodes/`, {
    method: "POST",
    body: request,
  });

// --- training runs and deployments ------------------------------------------------------

export const runList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<TrainingRun>>(`projects/${projectId}/runs/`, { signal }).then((page) => page.results);

/** Train on a ready snapshot (managers); the run is queued. */
export const runCreate = (projectId: number, snapshotId: number) =>
  apiFetch<TrainingRun>(`projects/${projectId}/runs/`, { method: "POST", body: { snapshot: snapshotId } });

export const deploymentList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<Deployment>>(`projects/${projectId}/deployments/`, { signal }).then((page) => page.results);

// --- flywheel cycles (frontend/src/cycles) ------------------------------------------------

export const cycleList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<Page<Cycle>>(`projects/${projectId}/cycles/`, { signal }).then((page) => page.results);

/** Run a cycle now (managers); 409 while one runs. */
export const cycleStart = (projectId: number) => apiFetch<Cycle>(`projects/${projectId}/cycles/`, { method: "POST" });

export const cycleApprove = (cycleId: number) => apiFetch<Cycle>(`cycles/${cycleId}/approve`, { method: "POST" });

export const cycleReject = (cycleId: number, reason: string) =>
  apiFetch<Cycle>(`cycles/${cycleId}/reject`, { method: "POST", body: { reason } });

export const cycleSettingsGet = (projectId: number, signal?: AbortSignal) =>
  apiFetch<CycleSettings>(`projects/${projectId}/cycle-settings`, { signal });

export const cycleSettingsUpdate = (projectId: number, changes: CycleSettingsInput) =>
  apiFetch<CycleSettings>(`projects/${projectId}/cycle-settings`, { method: "PATCH", body: changes });

/** Serve an earlier deployment's checkpoint again (managers; one transaction on the server). */
export const deploymentRollback = (projectId: number, deploymentId: number) =>
  apiFetch<Deployment>(`projects/${projectId}/deployments/${deploymentId}/rollback`, { method: "POST" });

// --- health -----------------------------------------------------------------------------

/**
 * The server's health report. A degraded server may answer 503 with the same body, so a 503
 * that carries `checks` is returned as a report rather than thrown.
 */
export async function healthGet(signal?: AbortSignal): Promise<Health> {
  try {
    return await apiFetch<Health>("health", { signal });
  } catch (error) {
    const body = error instanceof ApiError ? (error.body as Partial<Health> | undefined) : undefined;
    if (body && typeof body === "object" && body.checks) {
      return { status: "degraded", checks: body.checks };
    }
    throw error;
  }
}
