"""UI-TARS-1.5's native answer: ``Thought: ...`` (or ``Reflection:`` / ``Action_Summary:``) then ``Action: ...``.

Coordinates are absolute pixels of the image the model saw: the screenshot after Qwen2.5-VL's
``smart_resize`` (sides multiples of 28, 100*28*28 to 16384*28*28 pixels). A 1280x800 screenshot is
seen as 1288x812, so the model's (644, 406) is the screenshot's (640, 400).

The resize is ``ui_tars.action_parser.smart_resize`` from the ``ui-tars`` package (ByteDance's own,
constants ``IMAGE_FACTOR``, ``MIN_PIXELS``, ``MAX_PIXELS``). Its ``parse_action_to_structure_output``
is not used to read answers: in ui-tars 0.5.1 it raises on ``<|box_start|>`` (it expects the
special tokens already stripped), ``assert``s that ``Action:`` is there, prints to stdout, rewrites
``point=`` anywhere in the text (``type(content='point=3')`` types ``start_box=3``), reads only
integer ``<point>`` coordinates and returns them as the text of a list of floats; its pyautogui
code path ``eval``s model output. It has no renderer. So the reader below is our own (see
``_calls.py``), and the tests check it agrees with the package's parser on well-formed answers.

Mapping: ``click``/``left_single`` -> click, ``left_double`` -> double_click, ``right_single`` ->
right_click, ``drag``/``select`` -> drag, ``hotkey(key='ctrl c')`` -> hotkey(keys="ctrl+c"),
``type(content=...)`` -> type (a trailing ``\\n``, UI-TARS's "submit", stays in the text: both envs
press Enter for it), ``scroll(..., direction=)`` -> scroll (no point: the middle of the screen),
``wait()``, ``finished(content=)`` -> finished(answer=), ``call_user()`` -> call_user(question="").
Rendering writes ``start_box='<|box_start|>(x,y)<|box_end|>'`` as UI-TARS-1.5 was trained on, and a
non-empty call_user question as ``call_user(content='...')``, an argument UI-TARS itself never writes.
"""

from __future__ import annotations

from ui_tars.action_parser import IMAGE_FACTOR, MAX_PIXELS, MIN_PIXELS, smart_resize

from agent.actions import Action
from agent.formats._calls import call_to_action, read_call
from agent.formats._common import FormatError, Grid, split_thought_action

__all__ = ["RESIZES", "grid", "quote", "read", "render", "resized_grid", "split"]

_KEEP = ("Reflection:", "Action_Summary:")  # thought prefixes kept as written
_OUT = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


RESIZES = True  # the grid depends on the served processor's pixel limits (agent.formats.parse's min/max_pixels)


def grid(width: int, height: int, min_pixels: int | None = None, max_pixels: int | None = None) -> Grid:
    """Pixels of the smart-resized image UI-TARS sees, over the ``width`` x ``height`` screenshot. ``min_pixels`` /
    ``max_pixels``: the served processor's (its preprocessor_config.json); None: the ``ui-tars`` package's. They
    matter on small screens: a 160x210 MiniWoB screen is 252x336 at the package's minimum (78,400 pixels) but
    168x224 at Qwen2.5-VL's processor default (3,136); at 1280x800 and 1920x1080 the two agree."""
    return resized_grid(width, height, min_pixels or MIN_PIXELS, max_pixels or MAX_PIXELS, "UI-TARS")


def resized_grid(width: int, height: int, min_pixels: int, max_pixels: int, who: str) -> Grid:
    """Pixels of the image a Qwen2.5-VL-family model sees (Qwen's ``smart_resize``: sides multiples of 28, the area
    within ``min_pixels``..``max_pixels``), over the ``width`` x ``height`` screenshot."""
    try:
        rh, rw = smart_resize(height, width, factor=IMAGE_FACTOR, min_pixels=min_pixels, max_pixels=max_pixels)
    except ValueError as exc:
        raise FormatError(f"{who} cannot see a {width}x{height} screenshot: {exc}") from None
    return Grid(rw, rh, width, height, f"{who} sees the {width}x{height} screenshot as {rw}x{rh}")


def _thought(text: str) -> str:
    return text[8:].strip() if text[:8].lower() == "thought:" else text


def split(text: str) -> tuple[str, str]:
    try:
        before, body = split_thought_action(text)
    except FormatError as exc:
        raise FormatError(str(exc), thought=_thought(exc.thought)) from None
    return _thought(before), body


def read(body: str, width: int, height: int, **pixels: int | None) -> Action:
    return call_to_action(read_call(body), grid(width, height, **pixels))


def quote(text: str) -> str:
    """``text`` as a single-quoted value, escaped as UI-TARS's prompt asks (``\\' \\\\ \\n``)."""
    return "'" + "".join(_OUT.get(ch, ch) for ch in text) + "'"


def _box(g: Grid, x: int, y: int) -> str:
    mx, my = g.from_pixels(x, y)
    return f"'<|box_start|>({mx},{my})<|box_end|>'"


def action_text(action: Action, g: Grid) -> str:
    a = action.args
    pointer = {"click": "click", "double_click": "left_double", "right_click": "right_single"}
    if action.name in pointer:
        return f"{pointer[action.name]}(start_box={_box(g, a['x'], a['y'])})"
    if action.name == "drag":
        return f"drag(start_box={_box(g, a['x1'], a['y1'])}, end_box={_box(g, a['x2'], a['y2'])})"
    if action.name == "scroll":
        return f"scroll(start_box={_box(g, a['x'], a['y'])}, direction={quote(a['direction'])})"
    if action.name == "hotkey":
        return f"hotkey(key={quote(' '.join(a['keys'].split('+')))})"
    if action.name == "type":
        return f"type(content={quote(a['text'])})"
    if action.name == "finished":
        return f"finished(content={quote(a['answer'])})"
    if action.name == "call_user":
        return f"call_user(content={quote(a['question'])})" if a["question"] else "call_user()"
    if action.name == "shell":
        return f"shell(command={quote(a['command'])})"
    return "wait()"


def render(thought: str, action: Action | None, width: int, height: int, **pixels: int | None) -> str:
    head = thought if thought.startswith(_KEEP) else f"Thought: {thought}"
    if action is None:
        return head
    return f"{head}\nAction: {action_text(action, grid(width, height, **pixels))}"
