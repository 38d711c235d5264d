import { describe, expect, it } from "vitest";
import { apiParams, changedFilters, readFilters, withFilter } from "./filters";

describe("review list filters in the URL", () => {
  it("shows finished, unreviewed episodes when the URL names no status", () => {
    const filters = readFilters(new URLSearchParams(""));
    expect(filters.status).toBe("finished");
    expect(filters.review_status).toBe("unreviewed");
    expect(apiParams(4, new URLSearchParams(""))).toEqual({ project: "4", status: "finished", review_status: "unreviewed" });
  });

  it("writes 'any' for a cleared default, so the default does not come back, and drops the cursor", () => {
    const start = new URLSearchParams("cursor=abc&mode=supervised");
    const any = withFilter(start, "status", "");
    expect(any.get("status")).toBe("any");
    expect(any.has("cursor")).toBe(false);
    expect(readFilters(any).status).toBe("");
    expect(apiParams(1, any)).toEqual({ project: "1", mode: "supervised", review_status: "unreviewed" });
    const noMode = withFilter(any, "mode", "");
    expect(noMode.has("mode")).toBe(false);
  });

  it("passes every set filter and the cursor to the API, and counts what differs from the default view", () => {
    const params = new URLSearchParams("has_interventions=true&reward_min=0.5&ordering=-n_steps&cursor=xyz&review_status=accepted");
    expect(apiParams(2, params)).toEqual({
      project: "2",
      status: "finished",
      reward_min: "0.5",
      has_interventions: "true",
      review_status: "accepted",
      ordering: "-n_steps",
      cursor: "xyz",
    });
    expect(apiParams(2, params, false).cursor).toBeUndefined();
    expect(changedFilters(params)).toBe(3); // ordering is not a filter
    expect(changedFilters(new URLSearchParams(""))).toBe(0);
  });
});
