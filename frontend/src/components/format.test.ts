import { describe, expect, it } from "vitest";
import { stepNumber } from "./format";

describe("stepNumber", () => {
  it("shows a person the stored 0-based step index counted from 1", () => {
    expect(stepNumber(0)).toBe(1);
    expect(stepNumber(9)).toBe(10);
  });
});
