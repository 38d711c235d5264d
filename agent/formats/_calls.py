"""The function-call syntax UI-TARS writes, ``click(start_box='<|box_start|>(x,y)<|box_end|>')``.

Shared by ``uitars`` (pixels of the smart-resized image) and the plain form of ``qwen3-relative``
(``click(500, 300)``, ``click(start_box='(500,300)')`` on a 0-1000 grid): the two differ only in
the :class:`~agent.formats._common.Grid` their coordinates are read on.

Values are quoted strings (single or double quotes, with ``\\' \\" \\\\ \\n \\t \\r`` escapes) or
numbers. As UI-TARS's own parser does, a quote inside typed text need not be escaped: a closing
quote counts only where ``,`` or ``)`` follows it (``type(content='it's')`` types ``it's``).
A point is ``(x,y)``, ``[x, y]``, ``<point>x y</point>``, with or without ``<|box_start|>`` and
``<|box_end|>`` around it; a box ``(x1,y1,x2,y2)`` or ``<bbox>x1 y1 x2 y2</bbox>`` means its centre.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.actions import Action
from agent.formats._common import FormatError, Grid, number

__all__ = ["Call", "call_to_action", "read_call"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)[ \t]*=")
_NUMBER = re.compile(r"[-+]?[0-9.]+")
_SPACE = re.compile(r"\s*")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
_TOKENS = re.compile(r"<\|box_start\|>|<\|box_end\|>|</?point>|</?bbox>")


@dataclass
class Call:
    """One call as written: its name, positional values and keyword values (str or float)."""

    name: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)


def _string(text: str, pos: int) -> tuple[str, int]:
    """The quoted string that opens at ``pos``; returns it and the position after its closing quote."""
    quote, pos, out = text[pos], pos + 1, []
    while pos < len(text):
        ch = text[pos]
        if ch == "\\" and pos + 1 < len(text):
            nxt = text[pos + 1]
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            pos += 2
            continue
        if ch == quote:
            after = _SPACE.match(text, pos + 1).end()
            if text[after : after + 1] in (",", ")", ""):
                return "".join(out), pos + 1
        out.append(ch)
        pos += 1
    raise FormatError("a quoted value has no closing quote (was the answer cut off?)")


def _value(text: str, pos: int) -> tuple[str | float, int]:
    if text[pos : pos + 1] in ("'", '"'):
        return _string(text, pos)
    match = _NUMBER.match(text, pos)
    if not match:
        found = text[pos : pos + 20] or "the end"
        raise FormatError(f"expected a quoted value or a number, found {found!r}")
    return number(match.group()), match.end()


def read_call(text: str) -> Call:
    """Read ``name(arg, key=value, ...)``; nothing but whitespace may follow it."""
    body = text.strip()
    match = _NAME.match(body)
    if not match:
        raise FormatError(f"expected an action such as click(start_box='(x,y)'), found {body[:40]!r}")
    call, pos = Call(match.group()), match.end()
    if body[pos : pos + 1] != "(":
        raise FormatError(f"expected '(' after {call.name}")
    pos += 1
    while True:
        while body[pos : pos + 1].isspace():
            pos += 1
        if body[pos : pos + 1] == ")" and not call.args and not call.kwargs:
            pos += 1
            break
        key = _KEY.match(body, pos)
        if key:
            pos = key.end()
            while body[pos : pos + 1].isspace():
                pos += 1
            if key.group(1) in call.kwargs:
                raise FormatError(f"{call.name}: {key.group(1)} is given twice")
            call.kwargs[key.group(1)], pos = _value(body, pos)
        elif call.kwargs:
            raise FormatError(f"{call.name}: a positional value cannot follow a keyword one")
        else:
            value, pos = _value(body, pos)
            call.args.append(value)
        while body[pos : pos + 1].isspace():
            pos += 1
        if body[pos : pos + 1] == ",":
            pos += 1
            continue
        if body[pos : pos + 1] != ")":
            raise FormatError(f"{call.name}: expected ',' or ')', found {body[pos:pos + 20] or 'the end'!r}"
                              + (" (was the answer cut off?)" if pos >= len(body) else ""))
        pos += 1
        break
    rest = body[pos:].strip()
    if rest:
        if _NAME.match(rest) and "(" in rest:
            raise FormatError("the answer holds more than one action; Loupe takes one action per turn")
        raise FormatError(f"unexpected text after the action: {rest[:40]!r}")
    return call


def _point(value: str | float, key: str) -> tuple[float, float]:
    if not isinstance(value, str):
        raise FormatError(f"{key} must be a quoted point such as '(x,y)', got {value!r}")
    parts = [p for p in re.split(r"[,\s]+", _TOKENS.sub(" ", value).strip().strip("()[]").strip()) if p]
    if len(parts) not in (2, 4):
        raise FormatError(f"{key}={value[:60]!r} is not a point (x,y) or a box (x1,y1,x2,y2)")
    nums = [number(p) for p in parts]
    if len(nums) == 4:
        return (nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2
    return nums[0], nums[1]


def _points(call: Call) -> list[tuple[float, float]]:
    """The points of a call, start first: from box/point strings, x/y numbers or positional numbers."""
    kw, points = call.kwargs, []
    for key in ("start_box", "point", "start_point"):
        if key in kw:
            points.append(_point(kw.pop(key), key))
    for xk, yk in (("x", "y"), ("x1", "y1"), ("x2", "y2")):
        if xk in kw or yk in kw:
            if not (isinstance(kw.get(xk), float) and isinstance(kw.get(yk), float)):
                raise FormatError(f"{call.name} needs both {xk} and {yk} as numbers")
            points.append((kw.pop(xk), kw.pop(yk)))
    for key in ("end_box", "end_point"):
        if key in kw:
            points.append(_point(kw.pop(key), key))
    numbers = [a for a in call.args if isinstance(a, float)]
    if numbers:
        if len(numbers) not in (2, 4) or points:
            raise FormatError(f"{call.name} needs its point as x, y (or x1, y1, x2, y2)")
        points = [(numbers[0], numbers[1])] + ([(numbers[2], numbers[3])] if len(numbers) == 4 else [])
    return points


# the names UI-TARS (1.0 and 1.5) writes -> Loupe's canonical action
NAMES = {
    "click": "click", "left_single": "click", "left_double": "double_click", "double_click": "double_click",
    "right_single": "right_click", "right_click": "right_click", "drag": "drag", "select": "drag",
    "hotkey": "hotkey", "press": "hotkey", "type": "type", "scroll": "scroll", "wait": "wait",
    "finished": "finished", "call_user": "call_user", "shell": "shell",
}
_TEXT_KEYS = {"hotkey": ("key", "hotkey", "keys"), "type": ("content", "text"), "scroll": ("direction",),
              "finished": ("content", "answer"), "call_user": ("content", "question"), "shell": ("command",)}


def _text(call: Call, canonical: str) -> str | None:
    keys = [k for k in _TEXT_KEYS.get(canonical, ()) if k in call.kwargs]
    strings = [a for a in call.args if isinstance(a, str)]
    if len(keys) + len(strings) > 1:
        raise FormatError(f"{call.name}: its text is given twice")
    value = call.kwargs.pop(keys[0]) if keys else (strings[0] if strings else None)
    if value is not None and not isinstance(value, str):
        raise FormatError(f"{call.name}: {keys[0] if keys else 'its text'} must be quoted text, got {value!r}")
    return value


def call_to_action(call: Call, grid: Grid) -> Action:
    """The canonical action of ``call``, its points read on ``grid``."""
    canonical = NAMES.get(call.name)
    if canonical is None:
        raise FormatError(f"unknown action {call.name!r}; expected one of: {', '.join(NAMES)}")
    points = [grid.to_pixels(x, y) for x, y in _points(call)]
    text = _text(call, canonical)
    if call.kwargs:
        raise FormatError(f"{call.name}: unexpected argument {', '.join(call.kwargs)}")
    wanted = {"click": 1, "double_click": 1, "right_click": 1, "drag": 2}.get(canonical, 0)
    if canonical == "scroll":
        wanted = 1
        if not points:  # no point: scroll the middle of the screen
            points = [(grid.width // 2, grid.height // 2)]
        if text is None:
            raise FormatError(f"{call.name} needs a direction: up, down, left or right")
    if len(points) != wanted:
        raise FormatError(f"{call.name} takes {wanted} point{'s' if wanted != 1 else ''}, got {len(points)}")
    if canonical in ("click", "double_click", "right_click"):
        return Action(canonical, {"x": points[0][0], "y": points[0][1]})
    if canonical == "drag":
        (x1, y1), (x2, y2) = points
        return Action("drag", {"x1": x1, "y1": y1, "x2": x2, "y2": y2})
    if canonical == "scroll":
        return Action("scroll", {"x": points[0][0], "y": points[0][1], "direction": text.strip().lower()})
    if canonical == "hotkey":
        return Action("hotkey", {"keys": "+".join(re.split(r"[\s+]+", (text or "").strip()))})
    if canonical == "type":
        return Action("type", {"text": text or ""})
    if canonical == "finished":
        return Action("finished", {"answer": text or ""})
    if canonical == "call_user":
        return Action("call_user", {"question": text or ""})
    if canonical == "shell":
        if not text:
            raise FormatError(f"{call.name} needs the command to run")
        return Action("shell", {"command": text})
    return Action("wait", {})
