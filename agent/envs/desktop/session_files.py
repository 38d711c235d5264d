"""What a desktop session reads from its runtime folder (XDG_RUNTIME_DIR): its passwd entry under a per-desktop uid,
openbox's configuration (Loupe's menu of the apps, without Exit, Restart or Reconfigure; ctrl+alt+t opens a terminal
as on OSWorld's Ubuntu), the AT-SPI and Chrome helpers (Loupe's own folder may not be readable by the session's uid)
and the stand-in programs (programs.py)."""

from __future__ import annotations

import re
from pathlib import Path

from agent.envs.desktop.programs import session_programs

__all__ = ["ATSPI_HELPER", "write_session_files"]


ATSPI_HELPER = Path(__file__).with_name("atspi_helper.py")


CHROME_HELPER = Path(__file__).with_name("chrome_helper.py")


OPENBOX_MENU = Path(__file__).with_name("openbox") / "menu.xml"


OPENBOX_RC = Path("/etc/xdg/openbox/rc.xml")


_rc_template: str | None = None


def _openbox_rc(menu: Path) -> str:
    """Debian's openbox rc.xml with Loupe's menu file (``menu``) as its only one, instead of Debian's menus (whose
    root menu offers Exit, Restart and Reconfigure)."""
    global _rc_template
    if _rc_template is None:
        try:
            _rc_template = OPENBOX_RC.read_text()
        except OSError:  # openbox without its default configuration: its built-in one, with our menu
            _rc_template = '<?xml version="1.0"?>\n<openbox_config xmlns="http://openbox.org/3.4/rc">\n' \
                           "<menu><file>MENU</file></menu>\n</openbox_config>\n"
    menus = re.sub(r"<file>.*?</file>\s*", "", _rc_template, flags=re.S)
    # ctrl+alt+t opens a terminal, as on OSWorld's Ubuntu (its tasks press it)
    menus = re.sub(r"<keyboard>", '<keyboard>\n  <keybind key="C-A-t"><action name="Execute"><command>'
                   'x-terminal-emulator</command></action></keybind>', menus, count=1)
    # the <menu> section starts a line; <menu>root-menu</menu> inside actions names a menu
    return re.sub(r"<menu>(?=\s)", f"<menu>\n  <file>{menu}</file>", menus, count=1)


def write_session_files(runtime: Path, *, user: str, uid: int | None, home: Path) -> None:
    """Write what the session reads into ``runtime``; ``uid``: the session's own uid (a passwd and group entry for
    it, read through libnss_wrapper), None when it runs as Loupe's user."""
    files = {"atspi_helper.py": ATSPI_HELPER.read_text(), "openbox-menu.xml": OPENBOX_MENU.read_text(),
             "openbox-rc.xml": _openbox_rc(runtime / "openbox-menu.xml"), "chrome_helper.py": CHROME_HELPER.read_text()}
    if uid is not None:
        files["passwd"] = f"{user}:x:{uid}:{uid}:Loupe desktop:{home}:/bin/bash\n"
        files["group"] = f"{user}:x:{uid}:\n"
    for name, text in files.items():
        (runtime / name).write_text(text)
        (runtime / name).chmod(0o644)
    bin_dir = runtime / "bin"
    bin_dir.mkdir(mode=0o755)
    for name, text in session_programs().items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
