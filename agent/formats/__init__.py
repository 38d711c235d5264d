"""Answer formats of real GUI agents, read into and written from Loupe's canonical actions.

``parse(text, format=, width=, height=)`` reads a model's answer into an :class:`agent.actions.Turn`
whose action is in screenshot pixels (``width`` x ``height``: the screenshot the model saw). It never
raises: an answer it cannot read is a void turn whose ``void_reason`` says why, as
:func:`agent.actions.parse_turn` does for Loupe's grammar. ``render(thought, action, format=, ...)``
writes a canonical action back in the model's own format, so a person's edit becomes a training row
the model can learn from; ``parse(render(...))`` gives the action back, coordinates within a pixel
wherever the model's grid is no coarser than 2 screenshot pixels (the 0-1000 grid on a screen up to
2000 pixels wide). ``render`` with ``action=None`` writes the thought alone (a void turn's text).
``render`` raises ValueError for an unknown format, a bad screen size or a point off the screenshot.

Formats (the modules beside this one say how each maps to Loupe's actions):

- ``loupe``: Loupe's own ``Thought: ... / Action: click(x=, y=)`` (agent/actions.py, unchanged).
- ``uitars``: UI-TARS-1.5, pixels of the ``smart_resize``d image (``uitars.py``).
- ``qwen-relative``: Qwen2.5-VL / Qwen3-VL / GUI-Owl computer-use tool calls or plain calls,
  0-1000 grid (``qwen.py``).
- ``pyautogui``: OpenCUA's ``## Thought`` / ``## Action`` / ``## Code`` with pyautogui code,
  screenshot pixels or 0-1 fractions (``pyautogui.py``).

Each format's system prompt is ``agent.prompt.FORMAT_SYSTEM_PROMPTS[format]``.
"""

from __future__ import annotations

from agent.actions import Action, ActionSyntaxError, Turn, format_turn, parse_turn
from agent.formats import pyautogui, qwen, uitars
from agent.formats._common import FormatError, check_size

__all__ = ["FORMATS", "FormatError", "check_format", "parse", "render"]

FORMATS: tuple[str, ...] = ("loupe", "uitars", "qwen-relative", "pyautogui")
_MODULES = {"uitars": uitars, "qwen-relative": qwen, "pyautogui": pyautogui}
MAX_ANSWER_CHARS = 100_000  # a longer answer is a runaway generation, not a turn


def check_format(name: object) -> str:
    """``name`` if it is a known format; ValueError otherwise (for settings and render)."""
    if name not in FORMATS:
        raise ValueError(f"unknown answer format {name!r}; expected one of: {', '.join(FORMATS)}")
    return name


def _void(thought: str, reason: str, raw: str) -> Turn:
    return Turn(thought=thought, action=None, void_reason=reason, raw=raw)


def parse(text: str, *, format: str, width: int, height: int) -> Turn:
    """Read a model's answer in ``format``; never raises: unreadable answers are void turns."""
    raw = text if isinstance(text, str) else repr(text)
    thought = ""
    try:
        if not isinstance(text, str):
            return _void("", f"the answer must be text, got {type(text).__name__}", raw)
        if format not in FORMATS:
            return _void("", f"unknown answer format {format!r}; expected one of: {', '.join(FORMATS)}", raw)
        if format == "loupe":
            return parse_turn(text)
        if len(text) > MAX_ANSWER_CHARS:
            return _void("", f"the answer is {len(text)} characters long, more than {MAX_ANSWER_CHARS}", raw)
        if not text.strip():
            return _void("", "the answer is empty", raw)
        check_size(width, height)
        module = _MODULES[format]
        thought, body = module.split(text)
        return Turn(thought=thought, action=module.read(body, width, height), void_reason=None, raw=raw)
    except FormatError as exc:
        return _void(thought or exc.thought, str(exc), raw)
    except ActionSyntaxError as exc:
        return _void(thought, str(exc), raw)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises", on any input
        return _void(thought, f"could not read the answer: {type(exc).__name__}: {str(exc)[:120]}", raw)


def render(thought: str, action: Action | None, *, format: str, width: int, height: int) -> str:
    """The assistant text of ``thought`` and ``action`` in ``format``; see the module docstring."""
    check_format(format)
    if action is not None and not isinstance(action, Action):
        raise ValueError(f"action must be an agent.actions.Action or None, got {type(action).__name__}")
    thought = (thought or "").strip()
    if format == "loupe":
        return format_turn(thought, action) if action is not None else f"Thought: {thought}"
    check_size(width, height)
    return _MODULES[format].render(thought, action, width, height)
