// @vitest-environment node
import { describe, expect, it } from "vitest";
import cases from "./grammar.cases.json";
import {
  actionText,
  checkAction,
  clickAction,
  hotkeyAction,
  outsideScreen,
  parseAction,
  scrollAction,
  typeAction,
} from "./grammar";

/**
 * grammar.cases.json was produced by the server's parser (agent/actions.py `parse_action`):
 * [text, ok, action dict, canonical text] or [text, ok=false, error message]. Regenerate it when
 * the grammar changes so the two parsers keep agreeing word for word.
 */
type Case = [string, true, { name: string; args: Record<string, unknown> }, string] | [string, false, string];

describe("parseAction agrees with the server's parser", () => {
  for (const c of cases as Case[]) {
    it(`${c[1] ? "accepts" : "rejects"} ${JSON.stringify(c[0])}`, () => {
      const result = checkAction(c[0]);
      if (c[1]) {
        expect(result).toEqual({ ok: true, action: c[2], text: c[3] });
      } else {
        expect(result).toEqual({ ok: false, error: c[2] });
      }
    });
  }
});

describe("action builders", () => {
  it("write canonical text that parses back to the same action", () => {
    const texts = [
      clickAction(12.4, 40),
      typeAction('say "hi"\nthen \\ leave'),
      hotkeyAction("ctrl+a"),
      scrollAction(80, 105, "up"),
    ];
    expect(texts[0]).toBe("click(x=12, y=40)");
    for (const text of texts) expect(actionText(parseAction(text))).toBe(text);
    expect(parseAction(texts[1]).args.text).toBe('say "hi"\nthen \\ leave');
  });

  it("says when a point lies outside the screenshot", () => {
    expect(outsideScreen(parseAction("click(x=160, y=10)"), 160, 210)).toBe("(160, 10) is outside the 160x210 screenshot.");
    expect(outsideScreen(parseAction("drag(1, 2, 3, 300)"), 160, 210)).toBe("(3, 300) is outside the 160x210 screenshot.");
    expect(outsideScreen(parseAction("click(x=159, y=209)"), 160, 210)).toBeNull();
    expect(outsideScreen(parseAction("type(text=\"a\")"), 160, 210)).toBeNull();
  });
});
