"""The action grammar: what the model writes and what a person's action is stored as.

A turn is two parts::

    Thought: <free text, may span lines>
    Action: click(x=120, y=48)

``parse_action`` is strict and raises ``ActionSyntaxError`` with a message a person can act on
(it checks human-typed actions). ``parse_turn`` never raises: text it cannot read becomes a *void
turn* (SimpleTIR) that is stored, flagged and masked out of RL.

Design choices, kept small on purpose so a tiny character-level model can learn them:
- Arguments are keyword (``x=1``); positional arguments are accepted in schema order, but the
  canonical text (``Action.to_text``) always writes keywords, separated by ``", "``.
- Coordinates are ASCII integers (at most 6 digits, may be negative: off-screen is the env's
  business, not a syntax error). Strings are double-quoted with the escapes ``\\" \\\\ \\n \\r \\t``.
- The action of a turn is the *last* line starting with ``Action:`` (case-insensitive), so a
  thought may mention "Action:" itself and still round-trip; nothing but whitespace may follow it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACTION_NAMES",
    "DIRECTIONS",
    "Action",
    "ActionSyntaxError",
    "Turn",
    "format_turn",
    "parse_action",
    "parse_turn",
]


class ActionSyntaxError(ValueError):
    """An action text or dict that does not follow the grammar; the message says what to fix."""


# name -> ordered (argument, kind, default); kind "int" or "str"; default None means required.
_SCHEMA: dict[str, tuple[tuple[str, str, Any], ...]] = {
    "click": (("x", "int", None), ("y", "int", None)),
    "double_click": (("x", "int", None), ("y", "int", None)),
    "right_click": (("x", "int", None), ("y", "int", None)),
    "drag": (("x1", "int", None), ("y1", "int", None), ("x2", "int", None), ("y2", "int", None)),
    "type": (("text", "str", None),),
    "hotkey": (("keys", "str", None),),
    "scroll": (("x", "int", None), ("y", "int", None), ("direction", "str", "down")),
    "wait": (),
    "finished": (("answer", "str", ""),),
    "call_user": (("question", "str", None),),
    # a shell command, run as the desktop's user in its home folder: only hybrid desktop tasks (and the
    # terminal) take it, and their observation says so; the system prompt lists the GUI actions alone
    "shell": (("command", "str", None),),
}

ACTION_NAMES: tuple[str, ...] = tuple(_SCHEMA)
DIRECTIONS: tuple[str, ...] = ("up", "down", "left", "right")
_MAX_INT_DIGITS = 6  # also keeps int() far from Python's huge-string conversion limit

_ESCAPE_OUT = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE_IN = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}


def _quote(text: str) -> str:
    return '"' + "".join(_ESCAPE_OUT.get(ch, ch) for ch in text) + '"'


def _join(names: list[str]) -> str:
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


def _validate(name: Any, args: Any) -> dict[str, Any]:
    """Check ``args`` against the schema of ``name``; return them with defaults filled in."""
    if not isinstance(name, str) or name not in _SCHEMA:
        raise ActionSyntaxError(
            f"unknown action {name!r}; expected one of: {', '.join(ACTION_NAMES)}"
        )
    if not isinstance(args, dict):
        raise ActionSyntaxError(f"{name} arguments must be a mapping, got {type(args).__name__}")
    schema = _SCHEMA[name]
    known = [arg for arg, _, _ in schema]
    unknown = [key for key in args if key not in known]
    if unknown:
        takes = f"takes {_join(known)}" if known else "takes no arguments"
        raise ActionSyntaxError(f"{name} {takes}, got unexpected {_join([str(k) for k in unknown])}")
    missing = [arg for arg, _, default in schema if default is None and arg not in args]
    if missing:
        present = [arg for arg in known if arg in args]
        got = f", got only {_join(present)}" if present else ""
        raise ActionSyntaxError(f"{name} needs {_join([a for a, _, d in schema if d is None])}{got}")
    out: dict[str, Any] = {}
    for arg, kind, default in schema:
        value = args.get(arg, default)
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ActionSyntaxError(f"{name}: {arg} must be an integer pixel, got {value!r}")
            if abs(value) >= 10**_MAX_INT_DIGITS:
                raise ActionSyntaxError(f"{name}: {arg}={value} is out of range")
        elif not isinstance(value, str):
            raise ActionSyntaxError(f"{name}: {arg} must be a string, got {value!r}")
        out[arg] = value
    if name == "scroll" and out["direction"] not in DIRECTIONS:
        raise ActionSyntaxError(
            f"scroll: direction must be one of {', '.join(DIRECTIONS)}, got {out['direction']!r}"
        )
    if name == "type" and out["text"] == "":
        raise ActionSyntaxError('type needs some text, e.g. type(text="hello")')
    if name == "hotkey" and any(part.strip() == "" for part in out["keys"].split("+")):
        raise ActionSyntaxError(
            f'hotkey: keys must be key names joined by "+", e.g. "ctrl+a", got {out["keys"]!r}'
        )
    return out


@dataclass(frozen=True)
class Action:
    """One validated action. ``args`` holds ints for coordinates and str for text fields."""

    name: str
    args: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # An invalid Action never exists: construction validates and fills defaults.
        object.__setattr__(self, "args", _validate(self.name, self.args))

    def to_text(self) -> str:
        parts = []
        for arg, kind, _ in _SCHEMA[self.name]:
            value = self.args[arg]
            parts.append(f"{arg}={value}" if kind == "int" else f"{arg}={_quote(value)}")
        return f"{self.name}({', '.join(parts)})"

    def to_dict(self) -> dict:
        return {"name": self.name, "args": dict(self.args)}

    @classmethod
    def from_dict(cls, d: Any) -> Action:
        if not isinstance(d, dict) or "name" not in d:
            raise ActionSyntaxError(f'an action dict needs "name" and "args", got {d!r}')
        return cls(d["name"], dict(d.get("args") or {}))

    def __str__(self) -> str:
        return self.to_text()


class _Reader:
    """A hand-written scanner for ``name(arg=value, ...)``; reports errors with the position."""

    _NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
    _INT = re.compile(r"-?[0-9]+")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, message: str) -> ActionSyntaxError:
        return ActionSyntaxError(f"{message} (at character {self.pos + 1} of {self.text!r})")

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch: str, what: str) -> None:
        self.skip_space()
        if self.peek() != ch:
            found = repr(self.peek()) if self.peek() else "the end"
            raise self.fail(f"expected {what}, found {found}")
        self.pos += 1

    def name(self) -> str:
        self.skip_space()
        match = self._NAME.match(self.text, self.pos)
        if not match:
            raise self.fail("expected an action name such as click")
        self.pos = match.end()
        return match.group()

    def value(self) -> Any:
        self.skip_space()
        if self.peek() == '"':
            return self.string()
        match = self._INT.match(self.text, self.pos)
        if match:
            digits = match.group().lstrip("-")
            if len(digits) > _MAX_INT_DIGITS:
                raise self.fail(f"number {match.group()[:12]}... is out of range")
            self.pos = match.end()
            if self.peek() == ".":
                raise self.fail("coordinates must be whole pixels, not decimals")
            return int(match.group())
        raise self.fail('expected a number or a double-quoted string such as "hi"')

    def string(self) -> str:
        self.pos += 1  # opening quote
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == '"':
                self.pos += 1
                return "".join(out)
            if ch == "\\":
                nxt = self.text[self.pos + 1 : self.pos + 2]
                if nxt not in _ESCAPE_IN:
                    raise self.fail(f"unknown escape \\{nxt} in string; use \\\" \\\\ \\n \\r or \\t")
                out.append(_ESCAPE_IN[nxt])
                self.pos += 2
                continue
            out.append(ch)
            self.pos += 1
        raise self.fail("string is missing its closing double quote")

    def call(self) -> Action:
        name = self.name()
        if name not in _SCHEMA:
            raise ActionSyntaxError(
                f"unknown action {name!r}; expected one of: {', '.join(ACTION_NAMES)}"
            )
        self.expect("(", f"'(' after {name}")
        schema = _SCHEMA[name]
        args: dict[str, Any] = {}
        positional = 0
        self.skip_space()
        if self.peek() == ")":
            self.pos += 1
            return Action(name, args)
        while True:
            self.skip_space()
            match = self._NAME.match(self.text, self.pos)
            after = match.end() if match else self.pos
            while after < len(self.text) and self.text[after] in " \t":
                after += 1
            if match and self.text[after : after + 1] == "=":
                key = match.group()
                self.pos = after + 1
                if key in args:
                    raise self.fail(f"{name}: {key} is given twice")
                args[key] = self.value()
            else:
                if args and positional < len(args):
                    raise self.fail(f"{name}: a positional argument cannot follow a keyword one")
                if positional >= len(schema):
                    raise self.fail(f"{name} takes at most {len(schema)} arguments")
                args[schema[positional][0]] = self.value()
                positional += 1
            self.skip_space()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect(")", "',' or ')'")
            return Action(name, args)


def parse_action(text: str) -> Action:
    """Parse one action such as ``click(x=120, y=48)``; strict, raises ``ActionSyntaxError``.

    An optional leading ``Action:`` is accepted so a person may paste a whole action line.
    """
    if not isinstance(text, str):
        raise ActionSyntaxError(f"an action must be text, got {type(text).__name__}")
    body = text.strip()
    if body.lower().startswith("action:"):
        body = body[len("action:") :].strip()
    if not body:
        raise ActionSyntaxError("the action is empty; write e.g. click(x=120, y=48)")
    reader = _Reader(body)
    action = reader.call()
    if body[reader.pos :].strip():
        raise reader.fail(f"unexpected text after the action: {body[reader.pos:][:40]!r}")
    return action


@dataclass(frozen=True)
class Turn:
    """One model (or human) turn. ``void_reason`` is set exactly when ``action`` is None."""

    thought: str
    action: Action | None
    void_reason: str | None
    raw: str

    def __post_init__(self) -> None:
        if (self.action is None) == (self.void_reason is None):
            raise ValueError("a Turn has either an action or a void_reason, never both or neither")

    @property
    def is_void(self) -> bool:
        return self.action is None

    def to_text(self) -> str:
        if self.action is None:
            return self.raw  # a void turn is shown as the model wrote it
        return format_turn(self.thought, self.action)


def format_turn(thought: str, action: Action) -> str:
    """The canonical turn text: ``Thought: ...`` then ``Action: ...`` on the last line."""
    return f"Thought: {thought.strip()}\nAction: {action.to_text()}"


_ACTION_LINE = re.compile(r"^[ \t]*action[ \t]*:", re.IGNORECASE | re.MULTILINE)
_THOUGHT_PREFIX = re.compile(r"thought[ \t]*:", re.IGNORECASE)


def parse_turn(text: str) -> Turn:
    """Read a turn from model output. Never raises: unreadable text gives a void turn."""
    try:
        return _parse_turn(text)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises", on any input
        raw = text if isinstance(text, str) else repr(text)
        return Turn(thought="", action=None, void_reason=f"could not read the turn: {exc}", raw=raw)


def _parse_turn(text: str) -> Turn:
    if not isinstance(text, str):
        return Turn("", None, f"the turn must be text, got {type(text).__name__}", repr(text))
    matches = list(_ACTION_LINE.finditer(text))
    if not matches:
        thought = _thought_of(text)
        return Turn(thought, None, "no 'Action:' line found", text)
    last = matches[-1]
    thought = _thought_of(text[: last.start()])
    try:
        action = parse_action(text[last.end() :])
    except ActionSyntaxError as exc:
        return Turn(thought, None, str(exc), text)
    return Turn(thought, action, None, text)


def _thought_of(text: str) -> str:
    body = text.strip()
    match = _THOUGHT_PREFIX.match(body)
    if match:
        body = body[match.end() :]
    return body.strip()
