"""Qwen3-VL / GUI-Owl answers, coordinates on a 0-1000 grid over the screenshot (format ``qwen3-relative``; its old
name ``qwen-relative`` is still read, as stored checkpoints and rows name it).

Qwen2.5-VL writes the same tool calls with absolute pixels of its smart-resized image instead: format
``qwen25-absolute`` (qwen25.py), which reads and writes them with :func:`read_on` / :func:`render_on` on that grid.

Read in two forms:

- the computer-use tool call, ``<tool_call>{"name": "computer_use", "arguments": {"action":
  "left_click", "coordinate": [x, y]}}</tool_call>`` (``mobile_use`` is read the same way); the
  thought is the text around it, with ``<think>``/``<thinking>`` tags and a ``Thought:`` prefix dropped;
- a plain call on the last ``Action:`` line, or on the last line when there is none:
  ``click(500, 300)``, ``click(x=500, y=300)``, ``click(start_box='(500,300)')`` and every other
  UI-TARS name (UI-TARS-1.0, a Qwen2-VL, wrote this grammar on the 0-1000 grid).

Tool-call actions: ``left_click``/``click``, ``double_click``, ``right_click``,
``left_click_drag``/``drag`` (the start is ``start_coordinate``; Qwen's own drag starts wherever
the pointer is, which a single turn cannot know, so without it the turn is void), ``type``,
``key`` (``keys`` list -> hotkey "a+b"), ``scroll``/``hscroll`` (``pixels`` > 0 is up/right; its
amount is dropped, no point: the middle of the screen), ``wait``, ``terminate`` (success ->
finished(answer=""), failure -> finished(answer="FAIL"), OSWorld's word for giving up) and
``answer`` (-> finished(answer=text)). ``call_user`` with ``text`` is Loupe's addition: Qwen has
no way to ask the user. ``mouse_move``, ``middle_click``, ``triple_click`` and the phone actions
have no Loupe action: void. The grid's far edge (1000) is the last pixel.

Rendering writes ``Thought: ...`` then the tool call; a thought that itself holds ``<tool_call>`` or
``<think>`` tags does not come back as written.
"""

from __future__ import annotations

import json
import re

from agent.actions import Action
from agent.formats._calls import call_to_action, read_call
from agent.formats._common import FormatError, Grid, finite, split_thought_action

__all__ = ["grid", "read", "read_on", "render", "render_on", "split"]

_TOOLS = ("computer_use", "mobile_use")
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TAGS = re.compile(r"</?think(?:ing)?>")
_PLAIN_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\(")
_POINTER = {"left_click": "click", "click": "click", "double_click": "double_click", "right_click": "right_click"}
_NOT_LOUPE = ("mouse_move", "middle_click", "triple_click", "long_press", "swipe", "open", "system_button")
_SCROLL = 500  # pixels written for a rendered scroll; Loupe's scroll has no amount


def grid(width: int, height: int) -> Grid:
    return Grid(1000, 1000, width, height, "the 0-1000 grid")


def _thought(text: str) -> str:
    body = _TAGS.sub("", text).strip()
    return body[8:].strip() if body[:8].lower() == "thought:" else body


def split(text: str) -> tuple[str, str]:
    calls = list(_CALL.finditer(text))
    if len(calls) > 1:
        raise FormatError(f"the answer holds {len(calls)} tool calls; Loupe takes one action per turn")
    if calls:
        call = calls[0]
        return _thought(text[: call.start()] + text[call.end() :]), call.group(1).strip()
    if "<tool_call>" in text:
        raise FormatError("the <tool_call> is not closed (was the answer cut off?)",
                          thought=_thought(text[: text.index("<tool_call>")]))
    try:
        before, body = split_thought_action(text)
    except FormatError:
        lines = text.strip().rsplit("\n", 1)
        before, body = (lines[0], lines[1]) if len(lines) == 2 else ("", lines[0])
        if not _PLAIN_CALL.match(body.strip()):
            raise FormatError("no <tool_call> and no action found", thought=_thought(text)) from None
    return _thought(before), body.strip()


def _coordinate(value: object, g: Grid, key: str) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise FormatError(f"{key} must be [x, y], got {json.dumps(value)[:40]}")
    return g.to_pixels(finite(value[0]), finite(value[1]))


def _tool_call(body: str, g: Grid) -> Action:
    try:
        call = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"the tool call is not valid JSON: {str(exc)[:80]}") from None
    if not isinstance(call, dict) or call.get("name") not in _TOOLS:
        name = call.get("name") if isinstance(call, dict) else None
        raise FormatError(f"expected a computer_use tool call, got {'tool ' + repr(name) if name else body[:40]!r}")
    args = call.get("arguments")
    if isinstance(args, str):  # some servers pass the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            args = None
    if not isinstance(args, dict) or not isinstance(args.get("action"), str):
        raise FormatError('the tool call needs "arguments": {"action": ...}')
    kind = args["action"]
    if kind in _POINTER:
        x, y = _coordinate(args.get("coordinate"), g, "coordinate")
        return Action(_POINTER[kind], {"x": x, "y": y})
    if kind in ("left_click_drag", "drag"):
        if "start_coordinate" not in args:
            raise FormatError(f"{kind} starts wherever the pointer is, which is unknown; give start_coordinate")
        x1, y1 = _coordinate(args["start_coordinate"], g, "start_coordinate")
        x2, y2 = _coordinate(args.get("coordinate", args.get("end_coordinate")), g, "coordinate")
        return Action("drag", {"x1": x1, "y1": y1, "x2": x2, "y2": y2})
    if kind == "type":
        return Action("type", {"text": args.get("text")})
    if kind == "key":
        keys = args.get("keys")
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            raise FormatError(f'key needs "keys": a list of key names, got {json.dumps(keys)[:40]}')
        return Action("hotkey", {"keys": "+".join(keys)})
    if kind in ("scroll", "hscroll"):
        pixels = finite(args.get("pixels"), "scroll amount")
        if pixels == 0:
            raise FormatError(f"{kind} by 0 pixels does nothing")
        x, y = (_coordinate(args["coordinate"], g, "coordinate") if "coordinate" in args
                else (g.width // 2, g.height // 2))
        direction = ("up" if pixels > 0 else "down") if kind == "scroll" else ("right" if pixels > 0 else "left")
        return Action("scroll", {"x": x, "y": y, "direction": direction})
    if kind == "wait":
        return Action("wait", {})
    if kind == "terminate":
        status = args.get("status")
        if status not in ("success", "failure", "fail"):
            raise FormatError(f'terminate needs "status": "success" or "failure", got {status!r}')
        return Action("finished", {"answer": "" if status == "success" else "FAIL"})
    if kind == "answer":
        return Action("finished", {"answer": args.get("text")})
    if kind == "call_user":
        return Action("call_user", {"question": args.get("text", "")})
    if kind == "shell":
        command = args.get("command")
        if not isinstance(command, str) or not command:
            raise FormatError('shell needs "command": the command line to run')
        return Action("shell", {"command": command})
    if kind in _NOT_LOUPE:
        raise FormatError(f"{kind} has no Loupe action")
    raise FormatError(f"unknown computer_use action {kind!r}")


def read(body: str, width: int, height: int) -> Action:
    return read_on(body, grid(width, height))


def read_on(body: str, g: Grid) -> Action:
    """The action of a tool call or plain call whose coordinates are on grid ``g``."""
    if body[:1] in ("{", "["):
        return _tool_call(body, g)
    if not body:
        raise FormatError("no <tool_call> and no action found")
    return call_to_action(read_call(body), g)


def _args(action: Action, g: Grid) -> dict:
    a = action.args
    if action.name in ("click", "double_click", "right_click"):
        name = "left_click" if action.name == "click" else action.name
        return {"action": name, "coordinate": list(g.from_pixels(a["x"], a["y"]))}
    if action.name == "drag":
        return {"action": "left_click_drag", "start_coordinate": list(g.from_pixels(a["x1"], a["y1"])),
                "coordinate": list(g.from_pixels(a["x2"], a["y2"]))}
    if action.name == "scroll":
        kind = "scroll" if a["direction"] in ("up", "down") else "hscroll"
        sign = 1 if a["direction"] in ("up", "right") else -1
        return {"action": kind, "coordinate": list(g.from_pixels(a["x"], a["y"])), "pixels": sign * _SCROLL}
    if action.name == "type":
        return {"action": "type", "text": a["text"]}
    if action.name == "hotkey":
        return {"action": "key", "keys": a["keys"].split("+")}
    if action.name == "finished":
        if a["answer"] in ("", "FAIL"):
            return {"action": "terminate", "status": "success" if a["answer"] == "" else "failure"}
        return {"action": "answer", "text": a["answer"]}
    if action.name == "call_user":
        return {"action": "call_user", "text": a["question"]}
    if action.name == "shell":
        return {"action": "shell", "command": a["command"]}
    return {"action": "wait", "time": 2}


def render(thought: str, action: Action | None, width: int, height: int) -> str:
    return render_on(thought, action, grid(width, height))


def render_on(thought: str, action: Action | None, g: Grid) -> str:
    """``Thought: ...`` and the action's computer_use tool call, its coordinates on grid ``g``."""
    head = f"Thought: {thought}"
    if action is None:
        return head
    call = {"name": "computer_use", "arguments": _args(action, g)}
    return f"{head}\n<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"
