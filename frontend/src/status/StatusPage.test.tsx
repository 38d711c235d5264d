import { describe, expect, it } from "vitest";
import { poolSummary } from "./StatusPage";

describe("poolSummary", () => {
  it("says how busy a pool is, and its crashes when there were some", () => {
    const pool = { kind: "miniwob", capacity: 8, leased: 3, idle: 1, warm_target: 1, crashes: 0 };
    expect(poolSummary(pool)).toBe("miniwob: 3 of 8 leased, 1 warm");
    expect(poolSummary({ ...pool, crashes: 2 })).toBe("miniwob: 3 of 8 leased, 1 warm, 2 crashed");
  });
});
