// @vitest-environment node
import { describe, expect, it } from "vitest";
import { parseSeeds, seedHelp } from "./seeds";

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

  it("takes one seed for a supervised episode, and says so before and after", () => {
    expect(parseSeeds("3", { start: 0, end: 9 }, { single: true })).toEqual({ ok: true, seeds: [3] });
    for (const text of ["1-2", "1, 2", "4-4"]) {
      expect(parseSeeds(text, { start: 0, end: 9 }, { single: true })).toMatchObject({
        ok: false, error: expect.stringMatching(/^A supervised episode starts one at a time: give one seed/),
      });
    }
    expect(seedHelp("supervised", { seed_start: 0, seed_end: 9 })).toBe(
      "One seed (allowed 0–9): a supervised episode has you at it, so it starts one at a time.",
    );
    expect(seedHelp("autonomous", { seed_start: 0, seed_end: 9 })).toContain("a range (0-4)");
  });
});
