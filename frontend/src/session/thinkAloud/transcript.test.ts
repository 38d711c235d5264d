import { describe, expect, it } from "vitest";
import { groupByStep, mergeWords, wordsText } from "./transcript";

describe("mergeWords", () => {
  it("lists a word seen both stored and live once, in spoken order, the stored step winning", () => {
    const stored = [
      { word: "scroll", start: 12.5, end: 12.9, step: 1 },
      { word: "I", start: 10.0, end: 10.1, step: 0 },
    ];
    const live = [
      { word: "I", start: 10.0, end: 10.1, step: 1 }, // the server has since moved it to step 0
      { word: "think", start: 10.2, end: 10.5, step: 0 },
      { word: "down", start: 13.0, end: 13.3, step: 1 },
    ];
    const words = mergeWords(stored, live);
    expect(words.map((w) => [w.word, w.step])).toEqual([
      ["I", 0],
      ["think", 0],
      ["scroll", 1],
      ["down", 1],
    ]);
  });

  it("takes the live step for a stored word whose step is not executed yet", () => {
    const words = mergeWords([{ word: "next", start: 5, end: 5.2, step: null }], [{ word: "next", start: 5, end: 5.2, step: 3 }]);
    expect(words).toEqual([{ word: "next", start: 5, end: 5.2, step: 3, username: undefined }]);
  });

  it("reads the step from `step`, and skips words without a time", () => {
    const words = mergeWords([], [{ word: "a", start: 1, step: 2 }, { word: "b" }]);
    expect(words).toEqual([{ word: "a", start: 1, end: 1, step: 2 }]);
  });
});

describe("groupByStep", () => {
  it("groups by step in step order, words not yet on a step last", () => {
    const groups = groupByStep(
      mergeWords(
        [],
        [
          { word: "later", start: 9, end: 9.5, step: null },
          { word: "two", start: 7, end: 7.5, step: 2 },
          { word: "zero", start: 1, end: 1.5, step: 0 },
          { word: "also", start: 2, end: 2.5, step: 0 },
        ],
      ),
    );
    expect(groups.map((g) => [g.step, wordsText(g.words)])).toEqual([
      [0, "zero also"],
      [2, "two"],
      [null, "later"],
    ]);
  });
});
