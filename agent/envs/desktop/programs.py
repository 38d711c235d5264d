"""The programs a desktop session finds first on its PATH (its runtime folder's bin/), so that OSWorld's tasks find
the desktop their VM has, as far as a container allows. Each is a small script, and what it really is is said here
and in the README:

- ``python3`` / ``python``: a Python with pyautogui (``make env-tools`` makes it; Debian's python3 where it is not).
- ``sudo``: runs the command as the session's own user. The sandbox has no root and gives none (no new privileges):
  a task's ``sudo mkdir ~/x`` works, ``sudo apt-get install`` fails as the user's would, and nothing outside the
  sandbox is ever reached. ``-S`` reads the password line from stdin, as sudo would; other options are skipped.
- ``google-chrome`` (and ``-stable``): Chromium, with OSWorld's profile folder (~/.config/google-chrome).
- ``x-terminal-emulator`` / ``gnome-terminal``: xterm titled "Terminal", recording what it shows (script(1), in the
  session's runtime folder) for the ``vm_terminal_output`` getter; ctrl+alt+t opens one (openbox's binding).
- ``nautilus``: pcmanfm, the desktop's file manager.
- ``libreoffice`` / ``soffice``: LibreOffice with a profile that has been used (no tip of the day, no first-run
  wizard), as on the VM.
- ``vlc``: VLC with its HTTP interface on 127.0.0.1:8080 (password "password"), as OSWorld's VM configures it, for
  the ``vlc_playing_info`` getter (the sandbox's own loopback: nothing outside reaches it), its first-run privacy
  question answered.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["STAND_INS", "program_available", "session_programs"]

OSWORLD_PYTHON = Path(os.environ.get("LOUPE_OSWORLD_PYTHON", "/opt/loupe-osworld-python/bin/python3"))
SYSTEM_PYTHON = "/usr/bin/python3"

SUDO = """#!/bin/sh
# Loupe's sudo (agent/envs/desktop/programs.py): the desktop's sandbox has no root; the command runs as its user.
while [ $# -gt 0 ]; do
  case "$1" in
    -S|--stdin) read -r _password || true; shift ;;
    -u|-g|-p|-C|-h|-U|-r|-t|-T|--user|--group|--prompt) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
[ $# -eq 0 ] && exit 0
exec "$@"
"""

TERMINAL = """#!/bin/sh
# Loupe's terminal (agent/envs/desktop/programs.py): xterm, recording what it shows for the vm_terminal_output getter
log="${XDG_RUNTIME_DIR:-/tmp}/terminal-$(date +%s%N).log"
cd "$HOME" 2>/dev/null
exec xterm -title Terminal -geometry 100x30+80+60 -e script -q -f "$log"
"""


# LibreOffice as OSWorld's VM has it: used before (no first-run wizard, no tip of the day), its profile made once
LIBREOFFICE = """#!/bin/sh
# Loupe's libreoffice (agent/envs/desktop/programs.py): soffice with a profile that has been used before
profile="$HOME/.config/libreoffice/4/user"
if [ ! -e "$profile/registrymodifications.xcu" ]; then
  mkdir -p "$profile"
  cat > "$profile/registrymodifications.xcu" <<'XCU'
<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema">
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="ooSetupInstCompleted" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>99.0</value></prop></item>
</oor:items>
XCU
fi
exec /usr/bin/soffice "$@"
"""


# VLC as the VM has it: its HTTP interface on, and its first-run privacy question answered (a vlcrc made once)
VLC = """#!/bin/sh
# Loupe's vlc (agent/envs/desktop/programs.py): the HTTP interface on the sandbox's loopback, no first-run question
config="$HOME/.config/vlc"
[ -e "$config/vlcrc" ] || { mkdir -p "$config" && printf '[qt]\\nqt-privacy-ask=0\\n' > "$config/vlcrc"; }
exec /usr/bin/vlc --extraintf=http --http-host=127.0.0.1 --http-port=8080 --http-password=password "$@"
"""


def _chrome() -> str:
    return ('#!/bin/sh\n# Loupe\'s google-chrome (agent/envs/desktop/programs.py): Chromium with OSWorld\'s profile\n'
            'exec chromium --user-data-dir="$HOME/.config/google-chrome" --no-first-run --no-default-browser-check '
            '--password-store=basic --disable-dev-shm-usage "$@"\n')


def session_programs() -> dict[str, str]:
    """File name -> script, for the session's bin/ folder."""
    python = str(OSWORLD_PYTHON) if OSWORLD_PYTHON.exists() else SYSTEM_PYTHON
    run_python = f'#!/bin/sh\nexec "{python}" "$@"\n'
    programs = {"python3": run_python, "python": run_python, "sudo": SUDO, "x-terminal-emulator": TERMINAL,
                "gnome-terminal": TERMINAL}
    if shutil.which("chromium"):
        programs["google-chrome"] = programs["google-chrome-stable"] = _chrome()
    if shutil.which("pcmanfm"):
        programs["nautilus"] = '#!/bin/sh\nexec pcmanfm "$@"\n'
    if shutil.which("vlc"):
        programs["vlc"] = VLC
    if shutil.which("soffice"):
        programs["libreoffice"] = programs["soffice"] = LIBREOFFICE
    return programs


# a task's program -> what stands in for it here
STAND_INS = {"google-chrome": "chromium", "google-chrome-stable": "chromium", "nautilus": "pcmanfm",
             "gnome-terminal": "xterm", "x-terminal-emulator": "xterm"}


def program_available(name: str) -> bool:
    """Whether a task's setup can start ``name`` in a session here (the stand-ins above count)."""
    if name in ("python", "python3", "sudo"):
        return True
    return shutil.which(STAND_INS.get(name, name)) is not None or (
        name == "libreoffice" and shutil.which("soffice") is not None)
