"""What the format readers share: the error that becomes a void turn, and coordinate grids."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["MAX_NUMBER_CHARS", "FormatError", "Grid", "check_size", "finite", "number", "split_thought_action"]

MAX_NUMBER_CHARS = 12  # a coordinate written with more characters is garbage, not a place on a screen


class FormatError(ValueError):
    """An answer that does not follow its format; the message is the void turn's reason.

    ``thought`` is what could still be read as the thought when the failure came before it was split off.
    """

    def __init__(self, message: str, thought: str = "") -> None:
        super().__init__(message)
        self.thought = thought


def number(text: str, what: str = "coordinate") -> float:
    """A finite number written as digits (``-12``, ``3.5``); NaN, infinities and huge numbers fail."""
    body = text.strip()
    if len(body) > MAX_NUMBER_CHARS:
        raise FormatError(f"the {what} {body[:16]}... is too long to be a number on a screen")
    if not re.fullmatch(r"[-+]?(\d+(\.\d*)?|\.\d+)", body):
        raise FormatError(f"the {what} {body!r} is not a number")
    return float(body)


def finite(value: object, what: str = "coordinate") -> float:
    """``value`` (from JSON or Python literals) as a finite float; bools, NaN and infinities fail."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FormatError(f"the {what} {value!r} is not a number")
    if isinstance(value, int) and abs(value) >= 10**MAX_NUMBER_CHARS:
        raise FormatError(f"the {what} {str(value)[:16]}... is too large to be on a screen")
    if not math.isfinite(value):
        raise FormatError(f"the {what} {value!r} is not a finite number")
    return float(value)


def _round(value: float) -> int:
    return math.floor(value + 0.5)  # half up, the same on every platform (round() is half-even)


@dataclass(frozen=True)
class Grid:
    """The coordinate space a model writes in, laid over a ``width`` x ``height`` screenshot.

    The model's x runs over 0..``units_x`` and y over 0..``units_y``, both ends included (the far
    edge is taken as the last pixel); anything outside is not on the screen and voids the turn.
    """

    units_x: float
    units_y: float
    width: int
    height: int
    label: str  # says what the grid is, for the void reason: "the 0-1000 grid"

    def to_pixels(self, x: float, y: float) -> tuple[int, int]:
        if not (0 <= x <= self.units_x and 0 <= y <= self.units_y):
            raise FormatError(f"the point ({x:g}, {y:g}) is outside the screen ({self.label})")
        px = _round(x * self.width / self.units_x)
        py = _round(y * self.height / self.units_y)
        return min(px, self.width - 1), min(py, self.height - 1)

    def from_pixels(self, x: int, y: int) -> tuple[int, int]:
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise ValueError(f"the point ({x}, {y}) is outside the {self.width}x{self.height} screenshot")
        return _round(x * self.units_x / self.width), _round(y * self.units_y / self.height)


def check_size(width: object, height: object) -> None:
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise FormatError(f"the screenshot {name} must be a positive whole number of pixels, got {value!r}")


_ACTION_LINE = re.compile(r"^[ \t]*action[ \t]*:[ \t]*", re.IGNORECASE | re.MULTILINE)


def split_thought_action(text: str) -> tuple[str, str]:
    """``(text before, text after)`` the last line that starts with ``Action:``; no such line fails
    (with the whole text as the thought)."""
    matches = list(_ACTION_LINE.finditer(text))
    if not matches:
        raise FormatError("no 'Action:' line found", thought=text.strip())
    last = matches[-1]
    return text[: last.start()].strip(), text[last.end() :].strip()
