"""Whether a screen is the one a stored step saw: how a branch checks, step by step, that replaying its parent's
actions on the same seed restored the very state the parent was in.

Elements must match (positions within ``POSITION_TOLERANCE`` px), and a screenshot whose bytes differ still matches
while at most ``PIXEL_SHARE`` of its pixels differ by more than ``PIXEL_DELTA`` grey levels: JPEG and font-rendering
noise is low-amplitude, a changed widget is not (the thresholds' measurements: agent/README.md, "Measured")."""
from __future__ import annotations

import io

POSITION_TOLERANCE = 2  # px, for an element's centre and size
PIXEL_DELTA = 32  # grey levels (0-255) a pixel may differ by as rendering noise
PIXEL_SHARE = 0.002  # the share of pixels that may differ by more than PIXEL_DELTA (a ticked checkbox: 0.011)
_EXACT = ("role", "text", "checked", "focused")
_NEAR = ("x", "y", "width", "height")


def elements_difference(expected: list[dict], actual: list[dict]) -> str | None:
    """What differs between two element lists (``Element.to_dict`` shape), in words; None when they match."""
    if len(expected) != len(actual):
        return (f"the screen has {len(actual)} element{'' if len(actual) == 1 else 's'} where the stored step had "
                f"{len(expected)}")
    for position, (want, got) in enumerate(zip(expected, actual)):
        for key in _EXACT:
            if want.get(key) != got.get(key):
                return (f"element {position} ({want.get('role')} \"{str(want.get('text'))[:40]}\") has {key} "
                        f"{got.get(key)!r} where the stored step had {want.get(key)!r}")
        for key in _NEAR:
            if abs(int(want.get(key) or 0) - int(got.get(key) or 0)) > POSITION_TOLERANCE:
                return (f"element {position} ({want.get('role')} \"{str(want.get('text'))[:40]}\") has {key} "
                        f"{got.get(key)} where the stored step had {want.get(key)}")
    return None


def screenshot_difference(expected: bytes, actual: bytes) -> str | None:
    """What differs between two screenshots beyond rendering noise (see the module docstring); None when they
    match. Identical bytes match without decoding."""
    if expected == actual:
        return None
    import numpy as np
    from PIL import Image

    want = Image.open(io.BytesIO(expected)).convert("L")
    got = Image.open(io.BytesIO(actual)).convert("L")
    if want.size != got.size:
        return f"the screenshot is {got.size[0]}x{got.size[1]} where the stored one was {want.size[0]}x{want.size[1]}"
    delta = np.abs(np.asarray(want, dtype=np.int16) - np.asarray(got, dtype=np.int16))
    share = float((delta > PIXEL_DELTA).mean())
    if share > PIXEL_SHARE:
        return (f"{share:.1%} of the screenshot's pixels differ from the stored one "
                f"(at most {PIXEL_SHARE:.1%} may, as rendering noise)")
    return None


def screen_difference(*, expected_elements: list[dict], expected_screenshot: bytes | None, observation) -> str | None:
    """What differs between an observation and a stored step's screen (elements first, then the screenshot);
    None when it is the same state. A stored step without a screenshot is compared on its elements only."""
    difference = elements_difference(expected_elements, [e.to_dict() for e in observation.elements])
    if difference is None and expected_screenshot:
        difference = screenshot_difference(expected_screenshot, observation.screenshot)
    return difference
