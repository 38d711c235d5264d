"""Pointer and keyboard input through XTEST, in process (python-xlib): about 1 ms a click.

``xdotool`` costs a process and ~100 ms a click; XTEST events go straight to the X server.
Keys of a hotkey are held ``hold_s`` (40 ms) before release: GTK dialogs ignore a key pressed and
released in the same instant. Typed characters are held and spaced ``type_delay_s`` (12 ms), and a
key typed again waits until ``same_key_gap_s`` (120 ms) after its last press: galculator ignores a
key whose button is still showing pressed ("1024-25" became 1019). Characters with no key in the current keymap (accents, symbols of
other layouts) are typed by binding their keysym to a spare keycode for the moment.
"""

from __future__ import annotations

import time

from Xlib import X, XK
from Xlib.display import Display
from Xlib.ext import xtest

__all__ = ["KEY_NAMES", "XInput", "keysym_for"]

KEY_NAMES: dict[str, str] = {
    "ctrl": "Control_L", "control": "Control_L", "shift": "Shift_L", "alt": "Alt_L", "super": "Super_L",
    "win": "Super_L", "meta": "Super_L", "cmd": "Super_L", "enter": "Return", "return": "Return",
    "esc": "Escape", "escape": "Escape", "tab": "Tab", "backspace": "BackSpace", "delete": "Delete",
    "del": "Delete", "space": "space", "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "home": "Home", "end": "End", "pageup": "Prior", "pagedown": "Next", "insert": "Insert",
    "plus": "plus", "minus": "minus",
}
_BUTTONS = {"left": 1, "middle": 2, "right": 3}
_SCROLL_BUTTONS = {"up": 4, "down": 5, "left": 6, "right": 7}


def keysym_for(name: str) -> int:
    """The X keysym of a key name (``ctrl``, ``enter``, ``f5``, ``a``, ``é``); ValueError if unknown."""
    low = name.strip().lower()
    if low in KEY_NAMES:
        return XK.string_to_keysym(KEY_NAMES[low])
    if low.startswith("f") and low[1:].isdigit() and 1 <= int(low[1:]) <= 24:
        return XK.string_to_keysym(low.upper())
    if len(name.strip()) == 1:
        return _char_keysym(name.strip())
    named = XK.string_to_keysym(name.strip())
    if named:
        return named
    raise ValueError(f"unknown key {name.strip()!r} in hotkey; use names like ctrl, shift, alt, enter, tab, f5, a")


def _char_keysym(char: str) -> int:
    if char == "\n":
        return XK.string_to_keysym("Return")
    if char == "\t":
        return XK.string_to_keysym("Tab")
    code = ord(char)
    return code if 0x20 <= code <= 0x7E or 0xA0 <= code <= 0xFF else 0x01000000 + code


class XInput:
    """Synthetic input on one display. Every method flushes, so events are queued when it returns."""

    def __init__(self, display: Display, *, hold_s: float = 0.04, type_delay_s: float = 0.012) -> None:
        self.display = display
        self.hold_s = hold_s
        self.type_delay_s = type_delay_s
        self._spare: int | None = None
        self.same_key_gap_s = 0.12

    # -- pointer ---------------------------------------------------------------------------
    def move(self, x: int, y: int) -> None:
        xtest.fake_input(self.display, X.MotionNotify, x=x, y=y)
        self.display.sync()

    def click(self, x: int, y: int, *, button: str = "left", count: int = 1) -> None:
        self.move(x, y)
        code = _BUTTONS[button]
        for _ in range(count):
            xtest.fake_input(self.display, X.ButtonPress, code)
            xtest.fake_input(self.display, X.ButtonRelease, code)
            self.display.sync()
            if count > 1:
                time.sleep(0.03)  # well inside the double-click interval, apart enough to count twice

    def drag(self, x1: int, y1: int, x2: int, y2: int, *, steps: int = 10) -> None:
        self.move(x1, y1)
        xtest.fake_input(self.display, X.ButtonPress, 1)
        self.display.sync()
        time.sleep(0.05)  # toolkits start a drag only after the pointer moves with the button held
        for i in range(1, steps + 1):
            self.move(x1 + (x2 - x1) * i // steps, y1 + (y2 - y1) * i // steps)
            time.sleep(0.01)
        xtest.fake_input(self.display, X.ButtonRelease, 1)
        self.display.sync()

    def scroll(self, x: int, y: int, direction: str, *, clicks: int = 3) -> None:
        self.move(x, y)
        code = _SCROLL_BUTTONS[direction]
        for _ in range(clicks):
            xtest.fake_input(self.display, X.ButtonPress, code)
            xtest.fake_input(self.display, X.ButtonRelease, code)
        self.display.sync()

    # -- keyboard --------------------------------------------------------------------------
    def hotkey(self, keys: str) -> None:
        """Press ``ctrl+shift+t`` style keys in order, hold, release in reverse order."""
        syms = [keysym_for(part) for part in keys.split("+")]
        codes = [self._keycode(sym) for sym in syms]
        for code, _ in codes:
            xtest.fake_input(self.display, X.KeyPress, code)
        self.display.sync()
        time.sleep(self.hold_s)
        for code, _ in reversed(codes):
            xtest.fake_input(self.display, X.KeyRelease, code)
        self.display.sync()

    def type(self, text: str) -> None:
        shift = self.display.keysym_to_keycode(XK.string_to_keysym("Shift_L"))
        last_press: dict[int, float] = {}
        for char in text:
            code, shifted = self._keycode(_char_keysym(char))
            since = time.monotonic() - last_press.get(code, -1e9)
            if since < self.same_key_gap_s:
                time.sleep(self.same_key_gap_s - since)
            last_press[code] = time.monotonic()
            if shifted:
                xtest.fake_input(self.display, X.KeyPress, shift)
            xtest.fake_input(self.display, X.KeyPress, code)
            self.display.sync()
            time.sleep(self.type_delay_s)
            xtest.fake_input(self.display, X.KeyRelease, code)
            if shifted:
                xtest.fake_input(self.display, X.KeyRelease, shift)
            self.display.sync()
            time.sleep(self.type_delay_s)  # galculator drops a key pressed again at once ("1000" -> "100")

    def _keycode(self, keysym: int) -> tuple[int, bool]:
        """(keycode, needs shift) for a keysym; binds a spare keycode when the keymap lacks it."""
        code = self.display.keysym_to_keycode(keysym)
        if code:
            if self.display.keycode_to_keysym(code, 0) == keysym:
                return code, False
            if self.display.keycode_to_keysym(code, 1) == keysym:
                return code, True
        spare = self._spare_keycode()
        self.display.change_keyboard_mapping(spare, [(keysym, keysym)])
        self.display.sync()
        time.sleep(0.01)  # clients refresh their keymap on MappingNotify before the key arrives
        return spare, False

    def _spare_keycode(self) -> int:
        if self._spare is None:
            low, high = self.display.display.info.min_keycode, self.display.display.info.max_keycode
            mapping = self.display.get_keyboard_mapping(low, high - low + 1)
            empty = [low + i for i, syms in enumerate(mapping) if not any(syms)]
            if not empty:
                raise ValueError("the keymap has no free keycode to type this character with")
            self._spare = empty[-1]
        return self._spare
