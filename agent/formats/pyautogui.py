"""OpenCUA's answer: ``## Thought`` / ``## Action`` / ``## Code`` sections, the code a fenced block.

The code is read with :mod:`ast`, never run: each statement must be one call of ``pyautogui.*`` or
``computer.*`` with literal arguments (``import pyautogui`` alone is allowed). Coordinates are
screenshot pixels, or 0-1 fractions of the screenshot when every coordinate of the code lies in
0..1 and one of them is written with a decimal point (``click(1, 1)`` is the pixel (1, 1)).

Calls: ``click`` (``clicks=2`` double, ``button='right'`` right), ``doubleClick``, ``rightClick``,
``moveTo`` then ``dragTo`` (a drag; ``moveTo`` alone does nothing Loupe records, and a click without
a point clicks where ``moveTo`` left the pointer), ``write``/``typewrite`` (``write`` then
``press('enter')`` is one type whose text ends in ``\\n``), ``press`` and ``hotkey`` (-> hotkey
"ctrl+c"), ``scroll``/``hscroll`` (clicks > 0 is up/right, the amount is dropped; no point: the
middle of the screen), ``computer.wait``, ``computer.terminate(status=, answer=)`` (failure ->
finished(answer="FAIL")) and Loupe's ``computer.call_user(question=)``. A code block holding more
than one action is void: Loupe takes one action per turn. ``tripleClick`` has no Loupe action.

OpenCUA's own agent also knows a ``qwen25`` coordinate type (OpenCUA-7B/32B: pixels of the
``smart_resize``d image, min_pixels 3136); this format reads screenshot pixels as told, so serve those
checkpoints screenshots whose size ``smart_resize`` keeps, or their points drift by up to 14 pixels
toward the far edges (more on screens it shrinks).
The thought is the ``## Thought`` section; one holding a code fence or a line that is only
``Thought``/``Action``/``Code`` does not come back as written.
"""

from __future__ import annotations

import ast
import re

from agent.actions import Action
from agent.formats._common import FormatError, Grid, finite

__all__ = ["read", "render", "split"]

_FENCE = re.compile(r"```[ \t]*[A-Za-z]*[ \t]*\n(.*?)```", re.DOTALL)
_HEADER = re.compile(r"^[ \t]*(?:#{1,6}[ \t]*)?(thought|action|code)[ \t]*:?[ \t]*$", re.IGNORECASE | re.MULTILINE)
_MAX_CODE = 4000
_SIGNATURES = {
    "pyautogui.click": ("x", "y", "clicks", "interval", "button", "duration"),
    "pyautogui.doubleClick": ("x", "y", "interval", "button", "duration"),
    "pyautogui.rightClick": ("x", "y", "duration"),
    "pyautogui.moveTo": ("x", "y", "duration"),
    "pyautogui.dragTo": ("x", "y", "duration", "button"),
    "pyautogui.write": ("message", "interval"),
    "pyautogui.typewrite": ("message", "interval"),
    "pyautogui.press": ("keys", "presses", "interval"),
    "pyautogui.hotkey": (),  # *keys
    "pyautogui.scroll": ("clicks", "x", "y"),
    "pyautogui.hscroll": ("clicks", "x", "y"),
    "computer.wait": ("seconds",),
    "computer.terminate": ("status", "answer"),
    "computer.call_user": ("question",),
    "computer.shell": ("command",),
}
_POINTED = ("pyautogui.click", "pyautogui.doubleClick", "pyautogui.rightClick", "pyautogui.moveTo",
            "pyautogui.dragTo", "pyautogui.scroll", "pyautogui.hscroll")


def split(text: str) -> tuple[str, str]:
    """``(thought, code)``: the Thought section (or the text before the code) and the last code block."""
    fences = list(_FENCE.finditer(text))
    headers = list(_HEADER.finditer(text))
    if fences:
        code, end = fences[-1].group(1), fences[-1].start()
    elif "```" in text:
        raise FormatError("the code block is not closed (was the answer cut off?)",
                          thought=_thought(text, headers, text.index("```")))
    else:
        code_headers = [h for h in headers if h.group(1).lower() == "code"]
        if not code_headers:
            raise FormatError("no ```python code block found", thought=_thought(text, headers, len(text)))
        end = code_headers[-1].start()
        code = text[code_headers[-1].end() :]
    return _thought(text, headers, end), code.strip()


def _thought(text: str, headers: list, end: int) -> str:
    """The Thought section, or else the text before ``end`` without section headers."""
    thought_headers = [h for h in headers if h.group(1).lower() == "thought" and h.start() < end]
    if thought_headers:
        start = thought_headers[0].end()
        return text[start : min([h.start() for h in headers if h.start() > start] + [end])].strip()
    before = _HEADER.sub("", text[:end]).strip()
    return before[8:].strip() if before[:8].lower() == "thought:" else before


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise FormatError(f"arguments must be plain values, not {ast.unparse(node)[:40]!r}") from None


def _calls(code: str) -> list[tuple[str, dict]]:
    if len(code) > _MAX_CODE:
        raise FormatError(f"the code is {len(code)} characters long; one action needs far fewer")
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise FormatError(f"the code is not valid Python: {str(exc)[:80]}") from None
    calls = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names = [stmt.module or "."] if isinstance(stmt, ast.ImportFrom) else [a.name for a in stmt.names]
            if isinstance(stmt, ast.Import) and names == ["pyautogui"]:
                continue
            raise FormatError(f"the code imports {', '.join(names)}; only pyautogui calls are allowed")
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        func = call.func if isinstance(call, ast.Call) else None
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
            raise FormatError(f"line {stmt.lineno}: only calls such as pyautogui.click(x=10, y=20) are allowed, "
                              f"not {ast.unparse(stmt)[:40]!r}")
        name = f"{func.value.id}.{func.attr}"
        if name not in _SIGNATURES:
            raise FormatError(f"{name} is not an action Loupe reads"
                              + (" (Loupe has no triple click)" if func.attr == "tripleClick" else ""))
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise FormatError(f"{name}: * and ** arguments are not allowed")
        args = [_literal(a) for a in call.args]
        signature = _SIGNATURES[name]
        if name == "pyautogui.hotkey":
            bound = {"keys": args[0] if len(args) == 1 and isinstance(args[0], list) else args}
        elif len(args) > len(signature):
            raise FormatError(f"{name} takes at most {len(signature)} values, got {len(args)}")
        else:
            bound = dict(zip(signature, args))
        for keyword in call.keywords:
            if keyword.arg in bound or (keyword.arg not in signature):
                raise FormatError(f"{name}: unexpected or repeated argument {keyword.arg}")
            bound[keyword.arg] = _literal(keyword.value)
        calls.append((name, bound))
    return calls


def _grid(calls: list[tuple[str, dict]], width: int, height: int) -> Grid:
    coordinates = [finite(bound[k]) for name, bound in calls if name in _POINTED for k in ("x", "y")
                   if bound.get(k) is not None]
    if coordinates and all(0 <= c <= 1 for c in coordinates) and any(
            isinstance(bound.get(k), float) for _, bound in calls for k in ("x", "y")):
        return Grid(1.0, 1.0, width, height, "0-1 fractions of the screenshot")
    return Grid(width, height, width, height, f"the {width}x{height} screenshot")


def _text(bound: dict, key: str, name: str) -> str:
    value = bound.get(key)
    if not isinstance(value, str):
        raise FormatError(f"{name}: {key} must be text, got {value!r}")
    return value


def read(code: str, width: int, height: int) -> Action:
    calls = _calls(code)
    grid, pointer, done = _grid(calls, width, height), None, []
    for name, b in calls:
        at = pointer
        if b.get("x") is not None or b.get("y") is not None:
            at = grid.to_pixels(finite(b.get("x")), finite(b.get("y")))
        short = name.split(".")[1]
        if name in _POINTED[:5] and at is None:
            raise FormatError(f"{name} without x and y acts where the pointer is, which is unknown")
        if short in ("click", "doubleClick", "rightClick"):
            button = b.get("button", "right" if short == "rightClick" else "left")
            clicks = b.get("clicks", 2 if short == "doubleClick" else 1)
            kind = {("left", 1): "click", ("left", 2): "double_click", ("right", 1): "right_click"}.get((button, clicks))
            if kind is None:
                raise FormatError(f"{name} with button={button!r}, clicks={clicks!r} has no Loupe action")
            done.append(Action(kind, {"x": at[0], "y": at[1]}))
        elif short == "moveTo":
            pointer = at
        elif short == "dragTo":
            if pointer is None:
                raise FormatError("dragTo needs a moveTo first: where the drag starts is unknown")
            done.append(Action("drag", {"x1": pointer[0], "y1": pointer[1], "x2": at[0], "y2": at[1]}))
            pointer = at
        elif short in ("write", "typewrite"):
            done.append(Action("type", {"text": _text(b, "message", name)}))
        elif short in ("press", "hotkey"):
            keys = [b["keys"]] if isinstance(b.get("keys"), str) else b.get("keys")
            if not keys or not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise FormatError(f"{name} needs key names such as 'enter', got {b.get('keys')!r}")
            if short == "press" and (len(keys) != 1 or b.get("presses", 1) != 1):
                raise FormatError(f"{name} presses several keys one after another; Loupe takes one hotkey")
            done.append(Action("hotkey", {"keys": "+".join(keys)}))
        elif short in ("scroll", "hscroll"):
            clicks = finite(b.get("clicks"), "scroll amount")
            if clicks == 0:
                raise FormatError(f"{name}(0) does nothing")
            x, y = at or (width // 2, height // 2)
            direction = ("up" if clicks > 0 else "down") if short == "scroll" else ("right" if clicks > 0 else "left")
            done.append(Action("scroll", {"x": x, "y": y, "direction": direction}))
        elif short == "wait":
            done.append(Action("wait", {}))
        elif short == "terminate":
            status = b.get("status", "success")
            if status not in ("success", "failure", "fail"):
                raise FormatError(f"computer.terminate: status must be 'success' or 'failure', got {status!r}")
            answer = b.get("answer", "") if status == "success" else "FAIL"
            done.append(Action("finished", {"answer": answer}))
        elif short == "shell":
            done.append(Action("shell", {"command": _text(b, "command", name)}))
        else:
            done.append(Action("call_user", {"question": _text(b, "question", name)}))
    if len(done) == 2 and done[0].name == "type" and done[1] == Action("hotkey", {"keys": "enter"}):
        done = [Action("type", {"text": done[0].args["text"] + "\n"})]
    if not done:
        raise FormatError("the code does nothing Loupe records (moving the pointer alone is not an action)")
    if len(done) > 1:
        raise FormatError(f"the code does {len(done)} actions ({', '.join(a.name for a in done)}); "
                          "Loupe takes one action per turn")
    return done[0]


def _code(action: Action) -> str:
    a, name = action.args, action.name
    if name in ("click", "double_click", "right_click"):
        call = {"click": "click", "double_click": "doubleClick", "right_click": "rightClick"}[name]
        return f"pyautogui.{call}(x={a['x']}, y={a['y']})"
    if name == "drag":
        return f"pyautogui.moveTo(x={a['x1']}, y={a['y1']})\npyautogui.dragTo(x={a['x2']}, y={a['y2']})"
    if name == "scroll":
        call = "scroll" if a["direction"] in ("up", "down") else "hscroll"
        clicks = 5 if a["direction"] in ("up", "right") else -5
        return f"pyautogui.{call}({clicks}, x={a['x']}, y={a['y']})"
    if name == "type":
        return f"pyautogui.write(message={a['text']!r})"
    if name == "hotkey":
        keys = a["keys"].split("+")
        return f"pyautogui.press({keys[0]!r})" if len(keys) == 1 else f"pyautogui.hotkey({', '.join(map(repr, keys))})"
    if name == "finished":
        if a["answer"] == "FAIL":
            return "computer.terminate(status='failure')"
        return "computer.terminate(status='success'" + (f", answer={a['answer']!r})" if a["answer"] else ")")
    if name == "call_user":
        return f"computer.call_user(question={a['question']!r})"
    if name == "shell":
        return f"computer.shell(command={a['command']!r})"
    return "computer.wait(seconds=2)"


def _describe(action: Action) -> str:
    a = action.args
    if "x" in a:
        return f"{action.name.replace('_', ' ').capitalize()} at ({a['x']}, {a['y']})."
    if action.name == "drag":
        return f"Drag from ({a['x1']}, {a['y1']}) to ({a['x2']}, {a['y2']})."
    return {"type": "Type the text.", "hotkey": f"Press {a.get('keys')}.", "wait": "Wait.",
            "finished": "Finish the task.", "call_user": "Ask the user.", "shell": "Run a shell command."}[action.name]


def render(thought: str, action: Action | None, width: int, height: int) -> str:
    head = f"## Thought\n{thought}"
    if action is None:
        return head
    grid = Grid(width, height, width, height, "")
    points = [(action.args[x], action.args[y]) for x, y in (("x", "y"), ("x1", "y1"), ("x2", "y2")) if x in action.args]
    for x, y in points:
        grid.from_pixels(x, y)  # raises ValueError off the screen
    fence = "code" if action.name in ("wait", "finished", "call_user") else "python"
    return f"{head}\n\n## Action\n{_describe(action)}\n\n## Code\n```{fence}\n{_code(action)}\n```"
