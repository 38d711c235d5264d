"""One X display spoken to over the X protocol (python-xlib): its access cookie (MIT-MAGIC-COOKIE-1), a connection
with it, the top-level windows the window manager lists, raising, closing and the focus, and the desktop's
background. session.py's Desktop runs the display and its sessions and asks these."""

from __future__ import annotations

import os
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from Xlib import X, Xatom
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.protocol import event as xevent

__all__ = ["Window", "activate", "close_window", "has_focus", "open_display", "paint_background", "windows",
           "using_xauthority", "write_xauthority"]


_FAMILY_LOCAL, _FAMILY_WILD = 256, 65535


_COOKIE = b"MIT-MAGIC-COOKIE-1"


_XAUTH_LOCK = threading.Lock()  # XAUTHORITY is the process's: one connection opened at a time


def write_xauthority(path: Path, cookie: bytes, number: int | None = None, uid: int | None = None) -> None:
    """An Xauthority file (0600, owned by ``uid`` when given) holding ``cookie`` for display ``number`` on this host
    (python-xlib's match) and for any display (libX11's); the X server's -auth file takes the wildcard alone."""
    def entry(family: int, address: bytes, display: bytes) -> bytes:
        fields = (address, display, _COOKIE, cookie)
        return struct.pack(">H", family) + b"".join(struct.pack(">H", len(f)) + f for f in fields)

    data = b""
    if number is not None:
        data += entry(_FAMILY_LOCAL, socket.gethostname().encode(), str(number).encode())
    data += entry(_FAMILY_WILD, b"", b"")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    if uid is not None:
        os.chown(path, uid, uid)


@contextmanager
def using_xauthority(path: Path | None) -> Iterator[None]:
    """XAUTHORITY set to ``path`` while a connection opens (python-xlib and libX11 read it then, and only then)."""
    with _XAUTH_LOCK:
        saved = os.environ.get("XAUTHORITY")
        if path is not None:
            os.environ["XAUTHORITY"] = str(path)
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("XAUTHORITY", None)
            else:
                os.environ["XAUTHORITY"] = saved


def open_display(name: str, xauthority: Path | None) -> Display:
    """A python-xlib connection to display ``name`` with the cookie in ``xauthority``."""
    with using_xauthority(xauthority):
        return Display(name)


@dataclass(frozen=True)
class Window:
    """A top-level client window as the window manager lists it."""

    id: int
    title: str
    wm_class: str


def windows(display: Display) -> list[Window]:
    """Top-level client windows, in the window manager's order (oldest first)."""
    root = display.screen().root
    listed = root.get_full_property(display.intern_atom("_NET_CLIENT_LIST"), Xatom.WINDOW)
    found = []
    for wid in (listed.value if listed else []):
        window = display.create_resource_object("window", wid)
        try:
            title = window.get_full_property(display.intern_atom("_NET_WM_NAME"),
                                             display.intern_atom("UTF8_STRING"))
            name = title.value.decode("utf-8", "replace") if title else (window.get_wm_name() or "")
            wm_class = window.get_wm_class() or ("", "")
        except xerror.XError:
            continue  # closed while we looked
        found.append(Window(int(wid), name if isinstance(name, str) else name.decode(), wm_class[1]))
    return found


def activate(display: Display, window: Window) -> None:
    """Raise and focus a window through the window manager (_NET_ACTIVE_WINDOW)."""
    root = display.screen().root
    message = xevent.ClientMessage(
        window=display.create_resource_object("window", window.id),
        client_type=display.intern_atom("_NET_ACTIVE_WINDOW"), data=(32, [2, X.CurrentTime, 0, 0, 0]))
    root.send_event(message, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
    display.sync()


def close_window(display: Display, window: Window) -> None:
    """Ask a window to close through the window manager (_NET_CLOSE_WINDOW), as a click on its close button."""
    message = xevent.ClientMessage(
        window=display.create_resource_object("window", window.id),
        client_type=display.intern_atom("_NET_CLOSE_WINDOW"), data=(32, [X.CurrentTime, 2, 0, 0, 0]))
    display.screen().root.send_event(message, event_mask=X.SubstructureRedirectMask | X.SubstructureNotifyMask)
    display.sync()


def has_focus(display: Display, window: Window) -> bool:
    """Whether the keyboard focus is on ``window`` or inside it (xterm focuses a child window)."""
    current = display.get_input_focus().focus
    try:
        while not isinstance(current, int):  # X.NONE and X.PointerRoot come back as ints
            if current.id == window.id:
                return True
            tree = current.query_tree()
            if not tree.parent or tree.parent.id == tree.root.id:
                return False
            current = tree.parent
    except xerror.XError:  # the window closed while we looked
        return False
    return False


def paint_background(display: Display, width: int, height: int, colour: tuple[int, int, int], hint: str) -> None:
    """The root window's background: ``colour``, with ``hint`` written near its foot (it shows wherever no window
    is)."""
    from PIL import Image, ImageDraw, ImageFont

    screen = display.screen()
    root = screen.root
    if screen.root_depth != 24:
        return
    pixmap = root.create_pixmap(width, height, screen.root_depth)
    gc = pixmap.create_gc(foreground=(colour[0] << 16) | (colour[1] << 8) | colour[2])
    pixmap.fill_rectangle(gc, 0, 0, width, height)
    try:
        font = ImageFont.load_default(size=20)
    except TypeError:  # Pillow < 10.1: the bitmap font
        font = ImageFont.load_default()
    left, top, right, bottom = ImageDraw.Draw(Image.new("RGB", (1, 1))).textbbox((0, 0), hint, font=font)
    label = Image.new("RGB", (right - left + 24, bottom - top + 16), colour)
    ImageDraw.Draw(label).text((12 - left, 8 - top), hint, fill=(235, 240, 245), font=font)
    data = label.convert("RGBX").tobytes("raw", "BGRX")  # a 24-bit TrueColor screen's ZPixmap, 32 bits a pixel
    x, y = (width - label.width) // 2, height - label.height - 24
    pixmap.put_image(gc, x, y, label.width, label.height, X.ZPixmap, screen.root_depth, 0, data)
    root.change_attributes(background_pixmap=pixmap)
    root.clear_area(0, 0, width, height)
    gc.free()
    pixmap.free()
