import { describe, expect, it } from "vitest";
import { formatDuration, stepNumber } from "./format";

describe("stepNumber", () => {
  it("shows a person the stored 0-based step index counted from 1", () => {
    expect(stepNumber(0)).toBe(1);
    expect(stepNumber(9)).toBe(10);
  });
});

describe("formatDuration", () => {
  it("writes a length as m:ss, and h:mm:ss from an hour", () => {
    expect(formatDuration(0)).toBe("0:00");
    expect(formatDuration(7.4)).toBe("0:07");
    expect(formatDuration(59.6)).toBe("1:00");
    expect(formatDuration(125)).toBe("2:05");
    expect(formatDuration(3723)).toBe("1:02:03");
  });

  it("never shows Infinity or NaN: an unknown length is a dash", () => {
    for (const unknown of [Infinity, -Infinity, NaN, -1, null, undefined]) {
      expect(formatDuration(unknown)).toBe("—");
    }
  });
});
