import { describe, expect, it } from "vitest";
import {
  EMPTY_ANY_URL,
  JSON_EXAMPLES,
  anyUrlDefinition,
  anyUrlErrors,
  anyUrlFieldOf,
  anyUrlProblems,
  anyUrlForm,
  editorFor,
  parseDefinition,
  taskIdProblem,
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

describe("task ids and the page's own checks", () => {
  it("takes slugs and refuses markup, other scripts, capitals and spaces in the server's words", () => {
    for (const id of ["team-settings", "team_2", "7", "bb5e4c0d-f964-439c-97b6-bdb9747de3f4"]) expect(taskIdProblem(id)).toBeNull();
    for (const id of ["<script>alert(1)</script>", "новая задача <script>", "Team", "team settings", "-team"]) {
      expect(taskIdProblem(id)).toBe(
        `The task id '${id}' may hold only lowercase letters a-z, digits, '-' and '_', starting with a letter or a digit (like settings-notifications-off).`,
      );
    }
    expect(taskIdProblem("a".repeat(101))).toContain("is 101 characters long; the limit is 100.");
  });

  it("checks the id's form and the instruction's length of the any-URL form, from its current values", () => {
    const form = { ...EMPTY_ANY_URL, task_id: "Bad Id", instruction: "x".repeat(4001) };
    expect(Object.keys(anyUrlProblems(form))).toEqual(["task_id", "instruction"]);
    expect(anyUrlProblems({ ...form, task_id: "good-id", instruction: "x".repeat(4000) })).toEqual({});
  });

  it("moves each server message about an any-URL definition to the field it names, the rest kept", () => {
    const errors = anyUrlErrors({
      definition: [
        "The task id 'X' may hold only lowercase letters",
        "tasks[0]: The instruction is 5,000 characters long; the limit is 4,000.",
        "task 'x': start_url 'a' is not a web address",
        "task 'x': something else entirely",
      ],
      seed_end: ["The seed range ends before it starts."],
    });
    expect(errors).toEqual({
      task_id: ["The task id 'X' may hold only lowercase letters"],
      instruction: ["tasks[0]: The instruction is 5,000 characters long; the limit is 4,000."],
      start_url: ["task 'x': start_url 'a' is not a web address"],
      definition: ["task 'x': something else entirely"],
      seed_end: ["The seed range ends before it starts."],
    });
  });
});
