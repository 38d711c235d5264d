// @vitest-environment node
import { describe, expect, it } from "vitest";
import { parseSeeds } from "./seeds";

describe("parseSeeds", () => {
  it("reads single seeds, lists and inclusive ranges, without duplicates", () => {
    expect(parseSeeds("3")).toEqual({ ok: true, seeds: [3] });
    expect(parseSeeds("0, 1 2,2")).toEqual({ ok: true, seeds: [0, 1, 2] });
    expect(parseSeeds("5-7, 1")).toEqual({ ok: true, seeds: [5, 6, 7, 1] });
  });

  it("explains what is wrong", () => {
    expect(parseSeeds("")).toMatchObject({ ok: false, error: expect.stringMatching(/at least one seed/) });
    expect(parseSeeds("a")).toMatchObject({ ok: false, error: expect.stringMatching(/"a" is not a seed/) });
    expect(parseSeeds("9-3")).toMatchObject({ ok: false, error: expect.stringMatching(/backwards/) });
    expect(parseSeeds("0-500")).toMatchObject({ ok: false, error: expect.stringMatching(/at most 100/) });
    expect(parseSeeds("10", { start: 0, end: 9 })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/Seed 10 is outside this task's range 0–9/),
    });
  });
});
