/**
 * The review list's view lives in the page's URL query, so a view is a link: the filters the
 * API takes (flywheel/selectors.py `episodes_filter`), the ordering and the keyset cursor.
 *
 * With no `status` or `review_status` in the URL the list shows finished, unreviewed episodes;
 * choosing "any" writes `any`, so that a person who clears them does not get the default back.
 */

export const FILTER_KEYS = [
  "task",
  "split",
  "checkpoint",
  "mode",
  "status",
  "outcome",
  "reward_min",
  "reward_max",
  "has_interventions",
  "has_void",
  "disagreement",
  "annotator",
  "review_status",
  "created_after",
  "created_before",
  "ordering",
] as const;

export type FilterKey = (typeof FILTER_KEYS)[number];
export type Filters = Record<FilterKey, string>;

export const DEFAULTS: Partial<Filters> = { status: "finished", review_status: "unreviewed" };
export const ANY = "any";

export const ORDERINGS: { value: string; label: string }[] = [
  { value: "-id", label: "Newest first" },
  { value: "id", label: "Oldest first" },
  { value: "-n_steps", label: "Most steps" },
  { value: "n_steps", label: "Fewest steps" },
  { value: "-n_interventions", label: "Most interventions" },
];

/** The filters a URL query shows ("" = not filtered), defaults applied. */
export function readFilters(params: URLSearchParams): Filters {
  const out = {} as Filters;
  for (const key of FILTER_KEYS) {
    const raw = params.get(key);
    if (raw === null) out[key] = DEFAULTS[key] ?? "";
    else out[key] = raw === ANY ? "" : raw;
  }
  return out;
}

/** The URL query after setting one filter; the cursor is dropped (the pages change with the filter). */
export function withFilter(params: URLSearchParams, key: FilterKey, value: string): URLSearchParams {
  const next = new URLSearchParams(params);
  next.delete("cursor");
  if (value) next.set(key, value);
  else if (key in DEFAULTS) next.set(key, ANY);
  else next.delete(key);
  return next;
}

/** What the API is asked for: the project, every filter that is set, and the cursor. */
export function apiParams(projectId: number, params: URLSearchParams, withCursor = true): Record<string, string> {
  const out: Record<string, string> = { project: String(projectId) };
  const filters = readFilters(params);
  for (const key of FILTER_KEYS) if (filters[key]) out[key] = filters[key];
  const cursor = params.get("cursor");
  if (withCursor && cursor) out.cursor = cursor;
  return out;
}

/** How many filters differ from the default view (for "Clear filters"). */
export function changedFilters(params: URLSearchParams): number {
  const filters = readFilters(params);
  return FILTER_KEYS.filter((key) => key !== "ordering" && filters[key] !== (DEFAULTS[key] ?? "")).length;
}
