import { describe, expect, it } from "vitest";
import {
  EMPTY_ANY_URL,
  JSON_EXAMPLES,
  anyUrlDefinition,
  anyUrlFieldOf,
  anyUrlForm,
  editorFor,
  parseDefinition,
} from "./definitions";

describe("any-URL tasks", () => {
  it("writes only the chosen check's fields, trimmed, and reads them back", () => {
    const form = {
      ...EMPTY_ANY_URL,
      task_id: " team-settings ",
      start_url: "http://127.0.0.1:8000/ ",
      instruction: "Turn notifications off.",
      check_type: "dom_content" as const,
      selector: "#status",
      must_include: "Notifications are off\n\n  saved \n",
      match: "prefix" as const,
    };
    const definition = anyUrlDefinition(form, 12);
    expect(definition).toEqual({
      task_id: "team-settings",
      start_url: "http://127.0.0.1:8000/",
      instruction: "Turn notifications off.",
      check: { type: "dom_content", url: "last", selector: "#status", must_include: ["Notifications are off", "saved"] },
      max_steps: 12,
    });
    expect(anyUrlForm(definition)).toMatchObject({ check_url: "", must_include: "Notifications are off\nsaved" });
  });

  it("gives url_match its address and match, and judge or person no fields", () => {
    const url = anyUrlDefinition({ ...EMPTY_ANY_URL, check_type: "url_match", check_url: "http://a/done" });
    expect(url.check).toEqual({ type: "url_match", url: "http://a/done", match: "exact" });
    expect(anyUrlDefinition({ ...EMPTY_ANY_URL, check_type: "person" }).check).toEqual({ type: "person" });
  });

  it("leaves WebArena tasks and any-URL tasks with fields the form lacks to the JSON editor", () => {
    expect(anyUrlForm({ task_id: "x", intent: "y", start_url: "__SHOP__", eval: {} })).toBeNull();
    expect(anyUrlForm({ task_id: "x", start_url: "http://a/", instruction: "y", check: { type: "person" }, note: 1 })).toBeNull();
    expect(editorFor({ env_kind: "webapp", definition: { task_id: "x", start_url: "http://a/", instruction: "y", check: { type: "judge" } } })).toBe("any_url");
    expect(editorFor({ env_kind: "webapp", definition: { task_id: "x", intent: "y" } })).toBe("webarena");
    expect(editorFor({ env_kind: "desktop", definition: { id: "x" } })).toBe("osworld");
    expect(editorFor({ env_kind: "miniwob", definition: null })).toBe("shipped");
  });
});

describe("the JSON editor", () => {
  it("says plainly what is wrong before anything is sent", () => {
    expect(parseDefinition("  ")).toEqual({ ok: false, error: "Paste or write the task's JSON first." });
    expect(parseDefinition("[1]")).toMatchObject({ ok: false, error: expect.stringContaining("one JSON object") });
    expect(parseDefinition("{nope")).toMatchObject({ ok: false, error: expect.stringContaining("not valid JSON") });
    expect(parseDefinition('{"id": "x"}')).toEqual({ ok: true, value: { id: "x" } });
  });

  it("shows examples that are valid JSON tasks", () => {
    expect(parseDefinition(JSON_EXAMPLES.osworld)).toMatchObject({ ok: true, value: { id: "my-desktop-task" } });
    expect(parseDefinition(JSON_EXAMPLES.webarena)).toMatchObject({ ok: true, value: { task_id: "my-shop-task" } });
  });
});

describe("where a server message about an any-URL task shows", () => {
  it("beside the field it names", () => {
    expect(anyUrlFieldOf("task 'x': start_url 'intranet' is not a web address")).toBe("start_url");
    expect(anyUrlFieldOf("task 'x': check.url 'y' is not a web address")).toBe("check_url");
    expect(anyUrlFieldOf("task 'x': a dom_content check needs a CSS selector")).toBe("selector");
    expect(anyUrlFieldOf("task 'x': missing field: instruction")).toBe("instruction");
    expect(anyUrlFieldOf("something else")).toBeNull();
  });
});
