"""Chromium driven by Playwright's sync API, the part every browser env shares (miniwob.py, webapp/env.py): the
browser's path and flags, the script that reads a page's visible elements, Loupe's key names as Playwright's, and
one Playwright driver a thread. Playwright itself is imported when a driver starts."""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["CHROMIUM_ARGS", "CHROMIUM_PATH", "ELEMENTS_JS", "Driver", "playwright_key", "say_unconfined"]

log = logging.getLogger(__name__)

CHROMIUM_PATH = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--mute-audio",
    # Frames on demand rather than at 60 Hz: a screenshot waits for a frame, so this halves it.
    "--disable-frame-rate-limit", "--disable-gpu-vsync",
]


# Reads the visible elements of the task area, in document order, as plain dicts.
ELEMENTS_JS = r"""
([W, H, MAX]) => {
  const out = [];
  const skipIds = new Set(['query', 'reward-display', 'sync-task-cover', 'click-canvas']);
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const visible = (el) => {
    const st = window.getComputedStyle(el);
    return st.visibility !== 'hidden' && st.display !== 'none' && parseFloat(st.opacity || '1') > 0;
  };
  const box = (node) => {
    const rects = node.getClientRects();
    const r = rects.length > 1 ? rects[0] : node.getBoundingClientRect();
    return r;
  };
  const push = (role, text, r, extra) => {
    if (out.length >= MAX || r.width < 1 || r.height < 1) return;
    const x = Math.round(r.left + r.width / 2), y = Math.round(r.top + r.height / 2);
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    out.push(Object.assign({role, text, x, y, width: Math.round(r.width), height: Math.round(r.height)}, extra || {}));
  };
  const labelText = (input) => {
    const label = input.closest('label');
    if (label) return clean(label.textContent);
    if (input.id) {
      const l = document.querySelector('label[for="' + input.id + '"]');
      if (l) return clean(l.textContent);
    }
    return '';
  };
  const walk = (el) => {
    if (skipIds.has(el.id) || !visible(el)) return;
    const tag = el.tagName;
    const roleAttr = el.getAttribute('role');
    const focused = document.activeElement === el;
    if (tag === 'INPUT') {
      const t = (el.type || 'text').toLowerCase();
      if (t === 'checkbox' || t === 'radio') {
        push(t, labelText(el), el.getBoundingClientRect(), {checked: el.checked, focused});
      } else if (t === 'button' || t === 'submit' || t === 'reset') {
        push('button', el.value, el.getBoundingClientRect(), {focused});
      } else if (t !== 'hidden') {
        // A password shows as one mask character a typed character, as on the screen.
        push(t === 'password' ? 'password' : 'textbox', t === 'password' ? '*'.repeat(el.value.length) : el.value,
             el.getBoundingClientRect(), {focused});
      }
      return;
    }
    if (tag === 'TEXTAREA') { push('textbox', el.value, el.getBoundingClientRect(), {focused}); return; }
    if (tag === 'SELECT') {
      const opt = el.options[el.selectedIndex];
      push('select', opt ? clean(opt.textContent) : '', el.getBoundingClientRect(), {focused});
      return;
    }
    if (tag === 'BUTTON' || roleAttr === 'button') {
      push('button', clean(el.textContent) || el.getAttribute('title') || '', el.getBoundingClientRect(), {focused});
      return;
    }
    if (roleAttr === 'tab') { push('tab', clean(el.textContent), el.getBoundingClientRect(), {focused}); return; }
    if (tag === 'A' || el.classList.contains('alink')) {
      push('link', clean(el.textContent), box(el), {focused});
      return;
    }
    if (tag === 'LABEL' && el.querySelector('input[type=checkbox], input[type=radio]')) {
      el.querySelectorAll('input').forEach(walk);  // the label's text is the input's text
      return;
    }
    for (const child of el.childNodes) {
      if (child.nodeType === Node.TEXT_NODE) {
        const text = clean(child.data);
        if (!text) continue;
        const range = document.createRange();
        range.selectNodeContents(child);
        push('text', text, box(range));
      } else if (child.nodeType === Node.ELEMENT_NODE) {
        walk(child);
      }
    }
  };
  // The body, not #wrap: jQuery UI appends dialogs to the body. Off-area elements are dropped.
  walk(document.body);
  return out;
}
"""


_KEY_NAMES = {
    "ctrl": "Control", "control": "Control", "alt": "Alt", "option": "Alt", "shift": "Shift",
    "meta": "Meta", "cmd": "Meta", "command": "Meta", "win": "Meta", "super": "Meta",
    "enter": "Enter", "return": "Enter", "tab": "Tab", "esc": "Escape", "escape": "Escape",
    "backspace": "Backspace", "delete": "Delete", "del": "Delete", "space": "Space",
    "up": "ArrowUp", "down": "ArrowDown", "left": "ArrowLeft", "right": "ArrowRight",
    "home": "Home", "end": "End", "pageup": "PageUp", "pagedown": "PageDown", "insert": "Insert",
}


def playwright_key(keys: str) -> str:
    """Translate ``ctrl+a`` style keys to Playwright's ``Control+a``; raise ValueError if unknown."""
    parts = []
    for raw in keys.split("+"):
        name = raw.strip()
        low = name.lower()
        if low in _KEY_NAMES:
            parts.append(_KEY_NAMES[low])
        elif len(name) == 1:
            parts.append(name)
        elif low.startswith("f") and low[1:].isdigit() and 1 <= int(low[1:]) <= 12:
            parts.append(low.upper())
        else:
            raise ValueError(f"unknown key {name!r} in hotkey; use names like ctrl, shift, enter, tab, a")
    return "+".join(parts)


_said_unconfined = False


def say_unconfined(reason: str) -> None:
    global _said_unconfined
    if not _said_unconfined:
        _said_unconfined = True
        log.warning("Browsers run without a sandbox here (%s): as Loupe's own user, on its network; the webapp env's "
                    "any-URL pages are kept to their hosts by Chromium's proxy settings only", reason)


class Driver:
    """One Playwright driver per thread, shared by the envs of that thread (a second sync
    Playwright in the same thread is refused by Playwright)."""

    _local = threading.local()

    @classmethod
    def acquire(cls) -> Any:
        state = getattr(cls._local, "state", None)
        if state is None:
            from playwright.sync_api import sync_playwright

            state = cls._local.state = [sync_playwright().start(), 0]
        state[1] += 1
        return state[0]

    @classmethod
    def release(cls) -> None:
        state = getattr(cls._local, "state", None)
        if state is None:
            return
        state[1] -= 1
        if state[1] <= 0:
            cls._local.state = None
            try:
                state[0].stop()
            except Exception:  # noqa: BLE001 - stopping a dead driver must not mask the caller's error
                pass
