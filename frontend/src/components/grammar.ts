/**
 * The action grammar, in TypeScript: the same rules and the same error wording as the server's
 * parser (agent/actions.py), so an edit is checked as the person types and the server rarely has
 * to refuse one. The server stays the judge; this is a courtesy that saves a round trip.
 *
 *     click(x=120, y=48)   type(text="hi \"there\"")   scroll(x=80, y=100, direction="down")
 *
 * Keyword arguments (positional ones are accepted in schema order), integer pixels of at most six
 * digits, strings double-quoted with the escapes \" \\ \n \r \t.
 */
import type { Action } from "../api/episodes";

type Kind = "int" | "str";
/** argument, kind, default (undefined: required). */
type ArgSpec = readonly [string, Kind, string | undefined];

const SCHEMA: Record<string, readonly ArgSpec[]> = {
  click: [["x", "int", undefined], ["y", "int", undefined]],
  double_click: [["x", "int", undefined], ["y", "int", undefined]],
  right_click: [["x", "int", undefined], ["y", "int", undefined]],
  drag: [["x1", "int", undefined], ["y1", "int", undefined], ["x2", "int", undefined], ["y2", "int", undefined]],
  type: [["text", "str", undefined]],
  hotkey: [["keys", "str", undefined]],
  scroll: [["x", "int", undefined], ["y", "int", undefined], ["direction", "str", "down"]],
  wait: [],
  finished: [["answer", "str", ""]],
  call_user: [["question", "str", undefined]],
  shell: [["command", "str", undefined]],
};

export const ACTION_NAMES: readonly string[] = Object.keys(SCHEMA);
export const DIRECTIONS = ["up", "down", "left", "right"] as const;
export type Direction = (typeof DIRECTIONS)[number];
const MAX_INT_DIGITS = 6;

export class ActionSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ActionSyntaxError";
  }
}

export type ParseResult = { ok: true; action: Action; text: string } | { ok: false; error: string };

/** Python's repr() of a short string, so messages read exactly like the server's. */
function pyRepr(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value !== "string") return String(value);
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = "";
  for (const ch of value) {
    if (ch === "\\") out += "\\\\";
    else if (ch === quote) out += `\\${quote}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else out += ch;
  }
  return quote + out + quote;
}

function joinNames(names: string[]): string {
  if (names.length <= 2) return names.join(" and ");
  return `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]}`;
}

const ESCAPE_OUT: Record<string, string> = { "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const ESCAPE_IN: Record<string, string> = { "\\": "\\", '"': '"', n: "\n", r: "\r", t: "\t" };

/** A string as the grammar writes it: `"say \"hi\""`. */
export function quote(text: string): string {
  return `"${[...text].map((ch) => ESCAPE_OUT[ch] ?? ch).join("")}"`;
}

function unknownAction(name: string): ActionSyntaxError {
  return new ActionSyntaxError(`unknown action ${pyRepr(name)}; expected one of: ${ACTION_NAMES.join(", ")}`);
}

/** Check `args` against the schema of `name`; return them with defaults filled in. */
function validate(name: string, args: Record<string, number | string>): Record<string, number | string> {
  const schema = SCHEMA[name];
  if (!schema) throw unknownAction(name);
  const known = schema.map(([arg]) => arg);
  const unknown = Object.keys(args).filter((key) => !known.includes(key));
  if (unknown.length > 0) {
    const takes = known.length ? `takes ${joinNames(known)}` : "takes no arguments";
    throw new ActionSyntaxError(`${name} ${takes}, got unexpected ${joinNames(unknown)}`);
  }
  const required = schema.filter(([, , d]) => d === undefined).map(([arg]) => arg);
  if (required.some((arg) => !(arg in args))) {
    const present = known.filter((arg) => arg in args);
    const got = present.length ? `, got only ${joinNames(present)}` : "";
    throw new ActionSyntaxError(`${name} needs ${joinNames(required)}${got}`);
  }
  const out: Record<string, number | string> = {};
  for (const [arg, kind, fallback] of schema) {
    const value = arg in args ? args[arg] : (fallback as string);
    if (kind === "int") {
      if (typeof value !== "number" || !Number.isInteger(value)) {
        throw new ActionSyntaxError(`${name}: ${arg} must be an integer pixel, got ${pyRepr(value)}`);
      }
      if (Math.abs(value) >= 10 ** MAX_INT_DIGITS) throw new ActionSyntaxError(`${name}: ${arg}=${value} is out of range`);
    } else if (typeof value !== "string") {
      throw new ActionSyntaxError(`${name}: ${arg} must be a string, got ${pyRepr(value)}`);
    }
    out[arg] = value;
  }
  if (name === "scroll" && !DIRECTIONS.includes(out.direction as Direction)) {
    throw new ActionSyntaxError(`scroll: direction must be one of ${DIRECTIONS.join(", ")}, got ${pyRepr(out.direction)}`);
  }
  if (name === "type" && out.text === "") throw new ActionSyntaxError('type needs some text, e.g. type(text="hello")');
  if (name === "hotkey" && String(out.keys).split("+").some((part) => part.trim() === "")) {
    throw new ActionSyntaxError(`hotkey: keys must be key names joined by "+", e.g. "ctrl+a", got ${pyRepr(out.keys)}`);
  }
  return out;
}

/** The canonical text of a valid action: keyword arguments in schema order, `", "` between. */
export function actionText(action: Action): string {
  const schema = SCHEMA[action.name] ?? [];
  const parts = schema.map(([arg, kind]) => {
    const value = action.args[arg];
    return kind === "int" ? `${arg}=${value}` : `${arg}=${quote(String(value))}`;
  });
  return `${action.name}(${parts.join(", ")})`;
}

const NAME = /[A-Za-z_][A-Za-z0-9_]*/y;
const INT = /-?[0-9]+/y;

/** A hand-written scanner for `name(arg=value, ...)` that reports errors with the position. */
class Reader {
  pos = 0;
  constructor(readonly text: string) {}

  fail(message: string): ActionSyntaxError {
    return new ActionSyntaxError(`${message} (at character ${this.pos + 1} of ${pyRepr(this.text)})`);
  }

  skipSpace(): void {
    while (this.pos < this.text.length && (this.text[this.pos] === " " || this.text[this.pos] === "\t")) this.pos += 1;
  }

  peek(): string {
    return this.text[this.pos] ?? "";
  }

  match(pattern: RegExp, at = this.pos): RegExpExecArray | null {
    pattern.lastIndex = at;
    return pattern.exec(this.text);
  }

  expect(ch: string, what: string): void {
    this.skipSpace();
    if (this.peek() !== ch) {
      const found = this.peek() ? pyRepr(this.peek()) : "the end";
      throw this.fail(`expected ${what}, found ${found}`);
    }
    this.pos += 1;
  }

  name(): string {
    this.skipSpace();
    const m = this.match(NAME);
    if (!m) throw this.fail("expected an action name such as click");
    this.pos += m[0].length;
    return m[0];
  }

  value(): number | string {
    this.skipSpace();
    if (this.peek() === '"') return this.string();
    const m = this.match(INT);
    if (m) {
      const digits = m[0].replace(/^-/, "");
      if (digits.length > MAX_INT_DIGITS) throw this.fail(`number ${m[0].slice(0, 12)}... is out of range`);
      this.pos += m[0].length;
      if (this.peek() === ".") throw this.fail("coordinates must be whole pixels, not decimals");
      return Number.parseInt(m[0], 10);
    }
    throw this.fail('expected a number or a double-quoted string such as "hi"');
  }

  string(): string {
    this.pos += 1; // opening quote
    let out = "";
    while (this.pos < this.text.length) {
      const ch = this.text[this.pos];
      if (ch === '"') {
        this.pos += 1;
        return out;
      }
      if (ch === "\\") {
        const next = this.text.slice(this.pos + 1, this.pos + 2);
        if (!(next in ESCAPE_IN)) throw this.fail(`unknown escape \\${next} in string; use \\" \\\\ \\n \\r or \\t`);
        out += ESCAPE_IN[next];
        this.pos += 2;
        continue;
      }
      out += ch;
      this.pos += 1;
    }
    throw this.fail("string is missing its closing double quote");
  }

  call(): Action {
    const name = this.name();
    const schema = SCHEMA[name];
    if (!schema) throw unknownAction(name);
    this.expect("(", `'(' after ${name}`);
    const args: Record<string, number | string> = {};
    let positional = 0;
    this.skipSpace();
    if (this.peek() === ")") {
      this.pos += 1;
      return { name, args: validate(name, args) };
    }
    for (;;) {
      this.skipSpace();
      const m = this.match(NAME);
      let after = m ? this.pos + m[0].length : this.pos;
      while (after < this.text.length && (this.text[after] === " " || this.text[after] === "\t")) after += 1;
      if (m && this.text[after] === "=") {
        const key = m[0];
        this.pos = after + 1;
        if (key in args) throw this.fail(`${name}: ${key} is given twice`);
        args[key] = this.value();
      } else {
        if (Object.keys(args).length > 0 && positional < Object.keys(args).length) {
          throw this.fail(`${name}: a positional argument cannot follow a keyword one`);
        }
        if (positional >= schema.length) throw this.fail(`${name} takes at most ${schema.length} arguments`);
        args[schema[positional][0]] = this.value();
        positional += 1;
      }
      this.skipSpace();
      if (this.peek() === ",") {
        this.pos += 1;
        continue;
      }
      this.expect(")", "',' or ')'");
      return { name, args: validate(name, args) };
    }
  }
}

/**
 * Parse one action such as `click(x=120, y=48)`; strict, throws `ActionSyntaxError`.
 * A leading `Action:` is accepted so a person may paste a whole action line.
 */
export function parseAction(text: string): Action {
  let body = text.trim();
  if (body.toLowerCase().startsWith("action:")) body = body.slice("action:".length).trim();
  if (!body) throw new ActionSyntaxError("the action is empty; write e.g. click(x=120, y=48)");
  const reader = new Reader(body);
  const action = reader.call();
  const rest = body.slice(reader.pos);
  if (rest.trim()) throw reader.fail(`unexpected text after the action: ${pyRepr(rest.slice(0, 40))}`);
  return action;
}

/** `parseAction` for forms: never throws; gives the canonical text on success. */
export function checkAction(text: string): ParseResult {
  try {
    const action = parseAction(text);
    return { ok: true, action, text: actionText(action) };
  } catch (error) {
    if (error instanceof ActionSyntaxError) return { ok: false, error: error.message };
    throw error;
  }
}

/** Points an action names that must lie on the screenshot, for the "outside the screenshot" check. */
export function outsideScreen(action: Action, width: number, height: number): string | null {
  if (!(width > 0 && height > 0)) return null;
  for (const [xk, yk] of [["x", "y"], ["x1", "y1"], ["x2", "y2"]]) {
    const x = action.args[xk];
    const y = action.args[yk];
    if (typeof x === "number" && typeof y === "number" && !(x >= 0 && x < width && y >= 0 && y < height)) {
      return `(${x}, ${y}) is outside the ${width}x${height} screenshot.`;
    }
  }
  return null;
}

// --- builders for the take-over controls: always valid, always canonical ------------------

export const clickAction = (x: number, y: number): string => `click(x=${Math.round(x)}, y=${Math.round(y)})`;
export const typeAction = (text: string): string => `type(text=${quote(text)})`;
export const hotkeyAction = (keys: string): string => `hotkey(keys=${quote(keys)})`;
export const scrollAction = (x: number, y: number, direction: Direction): string =>
  `scroll(x=${Math.round(x)}, y=${Math.round(y)}, direction=${quote(direction)})`;
