"""Answer formats of real GUI agents, read into and written from Loupe's canonical actions.

``parse(text, format=, width=, height=, min_pixels=, max_pixels=)`` reads a model's answer into an :class:`agent.actions.Turn`
whose action is in screenshot pixels (``width`` x ``height``: the screenshot the model saw). It never
raises: an answer it cannot read is a void turn whose ``void_reason`` says why, as
:func:`agent.actions.parse_turn` does for Loupe's grammar. ``render(thought, action, format=, ...)``
writes a canonical action back in the model's own format, so a person's edit becomes a training row
the model can learn from; ``parse(render(...))`` gives the action back, coordinates within a pixel
wherever the model's grid is no coarser than 2 screenshot pixels (the 0-1000 grid on a screen up to
2000 pixels wide). ``render`` with ``action=None`` writes the thought alone (a void turn's text).
``render`` raises ValueError for an unknown format, a bad screen size or a point off the screenshot.
``min_pixels`` / ``max_pixels`` are the served checkpoint's image processor's limits (its
preprocessor_config.json, read by :func:`pixel_limits`) for a format whose coordinates are pixels of
the resized image (``uitars``, ``qwen25-absolute``); None takes the format's own defaults, and other
formats ignore them.

Formats (the modules beside this one say how each maps to Loupe's actions):

- ``loupe``: Loupe's own ``Thought: ... / Action: click(x=, y=)`` (agent/actions.py, unchanged).
- ``uitars``: UI-TARS-1.5, pixels of the ``smart_resize``d image (``uitars.py``).
- ``qwen3-relative``: Qwen3-VL / GUI-Owl computer-use tool calls or plain calls, 0-1000 grid
  (``qwen.py``). ``qwen-relative``, its name until Loupe told the two Qwens apart, is an alias (:data:`ALIASES`):
  stored checkpoints, steps, rows and settings name it, and every function here takes it.
- ``qwen25-absolute``: Qwen2.5-VL's same calls in absolute pixels of its ``smart_resize``d image (``qwen25.py``).
- ``pyautogui``: OpenCUA's ``## Thought`` / ``## Action`` / ``## Code`` with pyautogui code,
  screenshot pixels or 0-1 fractions (``pyautogui.py``).

Each format's system prompt is ``agent.system_prompts.FORMAT_SYSTEM_PROMPTS[format]``.
"""

from __future__ import annotations

from agent.actions import Action, ActionSyntaxError, Turn, format_turn, parse_turn
from agent.formats import pyautogui, qwen, qwen25, uitars
from agent.formats._common import FormatError, check_size

__all__ = ["ALIASES", "FORMATS", "FormatError", "canonical", "check_format", "check_pixels", "parse", "pixel_limits",
           "render", "resizes"]

# an old name -> the format it names now; old names stay valid wherever a format is (stored data and settings)
ALIASES: dict[str, str] = {"qwen-relative": "qwen3-relative"}
# every name a format may be given by: the formats, then their aliases (model choices and API fields take them all)
FORMATS: tuple[str, ...] = ("loupe", "uitars", "qwen3-relative", "qwen25-absolute", "pyautogui", *ALIASES)
_MODULES = {"uitars": uitars, "qwen3-relative": qwen, "qwen25-absolute": qwen25, "pyautogui": pyautogui}
MAX_ANSWER_CHARS = 100_000  # a longer answer is a runaway generation, not a turn


def canonical(name: str) -> str:
    """The format ``name`` names (an alias's current name; any other name as it is): what to compare formats by."""
    return ALIASES.get(name, name)


def resizes(name: str) -> bool:
    """Whether format ``name`` points on the image its processor resized (its grid takes pixel limits)."""
    return getattr(_MODULES.get(canonical(name)), "RESIZES", False)


def check_format(name: object) -> str:
    """``name`` if it is a known format or alias; ValueError otherwise (for settings and render)."""
    if name not in FORMATS:
        raise ValueError(f"unknown answer format {name!r}; expected one of: {', '.join(FORMATS)}")
    return name


def _void(thought: str, reason: str, raw: str) -> Turn:
    return Turn(thought=thought, action=None, void_reason=reason, raw=raw)


def check_pixels(min_pixels: object, max_pixels: object) -> dict:
    """``{"min_pixels", "max_pixels"}`` when both are None or positive whole numbers, the first no more than the
    second; FormatError (a ValueError) saying which is wrong otherwise."""
    for name, value in (("min_pixels", min_pixels), ("max_pixels", max_pixels)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
            raise FormatError(f"{name} must be a positive whole number of pixels, got {value!r}")
    if min_pixels is not None and max_pixels is not None and min_pixels > max_pixels:
        raise FormatError(f"min_pixels {min_pixels} is more than max_pixels {max_pixels}")
    return {"min_pixels": min_pixels, "max_pixels": max_pixels}


def _pixels(module, min_pixels: int | None, max_pixels: int | None) -> dict:
    limits = check_pixels(min_pixels, max_pixels)
    return limits if getattr(module, "RESIZES", False) else {}


def pixel_limits(checkpoint_dir) -> dict:
    """``{"min_pixels", "max_pixels"}`` of a checkpoint dir's image processor: a hub checkpoint's
    preprocessor_config.json (top-level ``min_pixels`` / ``max_pixels``, as Qwen2.5-VL's and UI-TARS-1.5's), or the
    ``image_processor`` of the processor_config.json transformers 5 writes (``size``: ``shortest_edge`` /
    ``longest_edge``, in pixels). None for a limit neither states. What parse and render take for the checkpoint
    that is served."""
    import json
    from pathlib import Path

    folder = Path(checkpoint_dir)
    for name, inner in (("preprocessor_config.json", None), ("processor_config.json", "image_processor")):
        try:
            config = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        config = config.get(inner) if inner else config
        if not isinstance(config, dict):
            continue
        size = config.get("size") if isinstance(config.get("size"), dict) else {}
        low = config.get("min_pixels", size.get("shortest_edge"))
        high = config.get("max_pixels", size.get("longest_edge"))
        return {"min_pixels": low if isinstance(low, int) and low > 0 else None,
                "max_pixels": high if isinstance(high, int) and high > 0 else None}
    return {"min_pixels": None, "max_pixels": None}


def parse(text: str, *, format: str, width: int, height: int, min_pixels: int | None = None,
          max_pixels: int | None = None) -> Turn:
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
        module = _MODULES[canonical(format)]
        pixels = _pixels(module, min_pixels, max_pixels)
        thought, body = module.split(text)
        return Turn(thought=thought, action=module.read(body, width, height, **pixels), void_reason=None, raw=raw)
    except FormatError as exc:
        return _void(thought or exc.thought, str(exc), raw)
    except ActionSyntaxError as exc:
        return _void(thought, str(exc), raw)
    except Exception as exc:  # noqa: BLE001 - the contract is "never raises", on any input
        return _void(thought, f"could not read the answer: {type(exc).__name__}: {str(exc)[:120]}", raw)


def render(thought: str, action: Action | None, *, format: str, width: int, height: int,
           min_pixels: int | None = None, max_pixels: int | None = None) -> str:
    """The assistant text of ``thought`` and ``action`` in ``format``; see the module docstring."""
    check_format(format)
    if action is not None and not isinstance(action, Action):
        raise ValueError(f"action must be an agent.actions.Action or None, got {type(action).__name__}")
    thought = (thought or "").strip()
    if format == "loupe":
        return format_turn(thought, action) if action is not None else f"Thought: {thought}"
    check_size(width, height)
    module = _MODULES[canonical(format)]
    return module.render(thought, action, width, height, **_pixels(module, min_pixels, max_pixels))
