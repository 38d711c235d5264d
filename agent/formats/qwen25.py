"""Qwen2.5-VL's answers (format ``qwen25-absolute``): qwen.py's computer-use tool calls and plain calls, their
coordinates absolute pixels of the image the model saw, the screenshot after its processor's ``smart_resize`` (sides
multiples of 28, the area between the processor's ``min_pixels`` and ``max_pixels``: its preprocessor_config.json,
Qwen2.5-VL's own 3,136 and 12,845,056 when the served checkpoint states none). A 1280x800 screenshot is seen as
1288x812, so the model's (644, 406) is the screenshot's (640, 400); a 160x210 MiniWoB screen as 168x224.

The grid is UI-TARS-1.5's (a Qwen2.5-VL too) with Qwen's default limits instead of the ``ui-tars`` package's; the
calls, thoughts and their mapping to Loupe's actions are Qwen3-VL's (qwen.py), whose 0-1000 grid is the only
difference.
"""

from __future__ import annotations

from agent.actions import Action
from agent.formats import qwen
from agent.formats._common import Grid
from agent.formats.uitars import resized_grid

__all__ = ["MAX_PIXELS", "MIN_PIXELS", "RESIZES", "grid", "read", "render", "split"]

RESIZES = True  # the grid depends on the served processor's pixel limits (agent.formats.parse's min/max_pixels)
MIN_PIXELS, MAX_PIXELS = 3136, 12845056  # Qwen2.5-VL's preprocessor_config.json (4 and 16384 patches of 28x28)
split = qwen.split


def grid(width: int, height: int, min_pixels: int | None = None, max_pixels: int | None = None) -> Grid:
    return resized_grid(width, height, min_pixels or MIN_PIXELS, max_pixels or MAX_PIXELS, "Qwen2.5-VL")


def read(body: str, width: int, height: int, **pixels: int | None) -> Action:
    return qwen.read_on(body, grid(width, height, **pixels))


def render(thought: str, action: Action | None, width: int, height: int, **pixels: int | None) -> str:
    return qwen.render_on(thought, action, grid(width, height, **pixels))
