"""OSWorld's setup steps (a task's ``config`` and ``evaluator.postconfig``), run on an episode's desktop as OSWorld
runs them: one registry, ``SETUP_STEPS``, a step's required parameters, how it runs and what the loader checks.

A command that exits with an error does not stop the setup (its output is kept in ``desktop.notes``); a step that
runs past its time limit, or hits a limit of the sandbox, ends the setup and names itself. ``download`` copies a
file of the project's file store; ``googledrive`` and ``login`` (a Google account) are refused with why
(``REFUSED_STEPS``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError
from agent.envs.desktop import chrome
from agent.envs.desktop.osworld_task import Problems, TaskFile
from agent.envs.desktop.osworld_vm import CACHE_DIR, as_argv, check_home_path, episode_cache, find_file, home_path, \
    local_path, map_home

__all__ = ["REFUSED_STEPS", "SETUP_STEPS", "SETUP_TIMEOUT_S", "SetupRun", "StepKind", "opener", "run_setup"]

# How long a launched app may take to show its window. A GTK app's first window waits on the accessibility bus
# (AT-SPI), which a loaded 2-core host answers slowly: galculator once took over 30 s beside a full test run.
SETUP_TIMEOUT_S = 60.0


def run_setup(steps: list[dict], desktop: Any, *, window_timeout_s: float = SETUP_TIMEOUT_S,
              files: dict | None = None, where: str = "setup") -> None:
    """Run setup steps in order; EnvError names the step that failed (ran past its limit, hit a sandbox limit, a
    window that never came) and why. A command that exits with an error goes on, as in OSWorld (noted on the
    desktop: ``desktop.notes``)."""
    assert desktop.home is not None
    run = SetupRun(desktop=desktop, window_timeout_s=window_timeout_s, files=files or {})
    for index, step in enumerate(steps):
        kind, parameters = step["type"], step.get("parameters", {})
        label = f"{where} step {index + 1} ({kind})"
        try:
            SETUP_STEPS[kind].run(run, parameters, label)
        except EnvError as exc:
            message = str(exc)
            raise EnvError(message if message.startswith(label) else f"{label}: {message}") from None


def _what(parameters: dict) -> str:
    """A step's command, briefly, for the messages that name the step."""
    value = parameters.get("command")
    text = value if isinstance(value, str) else shlex.join(map(str, value)) if isinstance(value, list) else str(value)
    text = " ".join(text.split())
    return repr(text if len(text) <= 80 else text[:77] + "...")


@dataclass
class SetupRun:
    """What setup steps share while they run."""

    desktop: Any
    window_timeout_s: float
    files: dict

    def note(self, message: str) -> None:
        notes = getattr(self.desktop, "notes", None)
        if notes is not None:
            notes.append(message)

    @property
    def cache(self) -> Path:
        """The episode's cache folder (an execute step's ``stdout`` file, read by the ``cache_file`` getter)."""
        return episode_cache(self.desktop)


@dataclass(frozen=True)
class StepKind:
    required: tuple[str, ...]
    run: Callable[[SetupRun, dict, str], None]
    check: Callable[[dict, str, Problems, dict], None] = lambda parameters, where, problems, context: None


def _check_command(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    command = parameters["command"]
    if not command or not (isinstance(command, str) or (isinstance(command, list) and all(
            isinstance(part, (str, int, float)) for part in command))):
        problems.add(f"{where}: command must be a string or a list of strings")
        return
    for key in ("stdout", "stderr"):
        name = parameters.get(key)
        if name:
            if not isinstance(name, str) or "/" in name or name.startswith("."):
                problems.add(f"{where}: {key} must be a file name, got {name!r}")
            else:
                context["stdout"].add(name)


def _check_launch(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    _check_command(parameters, where, problems, context)
    program = _program(parameters["command"], bool(parameters.get("shell")))
    if program:
        context["programs"].append(program)


def _program(command: Any, shell: bool) -> str:
    """The program a launch starts (its first word), "" when a shell line says more than one."""
    try:
        words = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    except ValueError:
        return ""
    if not words or (shell and any(char in command for char in ";&|") if isinstance(command, str) else False):
        return ""
    return Path(words[0]).name if words[0].startswith("/usr/bin/") else words[0]


def _run_command(run: SetupRun, parameters: dict, where: str) -> None:
    command = as_argv(map_home(parameters["command"], run.desktop.home), bool(parameters.get("shell", False)))
    timeout = float(parameters.get("timeout", SETUP_TIMEOUT_S))
    until = parameters.get("until") or {}
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = run.desktop.run(command, timeout_s=max(1.0, deadline - time.monotonic()))
        except EnvError as exc:  # it ran over its time (and maybe hit a limit: the message says)
            rest = str(exc).split(" and was stopped", 1)[-1]  # "; it hit its process limit ..." where it did
            raise EnvError(f"{where}: {_what(parameters)} ran over {timeout} s and was stopped{rest}") from None
        for key in ("stdout", "stderr"):
            if parameters.get(key):
                (run.cache / parameters[key]).write_text(result.stdout if key == "stdout" else result.stderr)
        breach = run.desktop.breach()
        if breach:  # a limit of the sandbox it hit (a fork bomb's parent may have exited 0): the episode fails
            raise EnvError(f"{where}: {_what(parameters)} exited with code {result.returncode} ({breach}): "
                           f"{(result.stderr or result.stdout).strip()[-300:]}")
        if result.returncode != 0:
            run.note(f"{where}: {_what(parameters)} exited with code {result.returncode}: "
                     f"{(result.stderr or result.stdout).strip()[-200:]}")
        done = not until or ("returncode" in until and result.returncode == until["returncode"]) or (
            "stdout" in until and until["stdout"] in result.stdout) or (
            "stderr" in until and until["stderr"] in result.stderr)
        if done:
            return
        if time.monotonic() > deadline:
            raise EnvError(f"{where}: its 'until' condition {until!r} did not hold in {timeout:g} s")
        time.sleep(0.3)


# programs that open no window: a launch of one starts it and goes on (OSWorld waits for nothing)
WINDOWLESS = {"socat", "pkill", "killall", "kill", "nohup", "sleep-forever", "true", "timedatectl"}


def _run_launch(run: SetupRun, parameters: dict, where: str) -> None:
    shell = bool(parameters.get("shell", False))
    command = as_argv(map_home(parameters["command"], run.desktop.home), shell)
    if _program(parameters["command"], shell) in WINDOWLESS:
        process = run.desktop.popen(command, log=f"launch-{int(time.monotonic() * 1000)}.log")
        time.sleep(0.2)
        if process.poll() not in (None, 0):
            run.note(f"{where}: {_what(parameters)} exited with code {process.returncode}")
        return
    _launch(run.desktop, command, shell=False, where=where, timeout_s=run.window_timeout_s)


# what ``open`` starts for a file, by its extension (OSWorld's VM opens it with GNOME's default app)
OPENERS: dict[str, list[str]] = {
    **dict.fromkeys((".xlsx", ".xls", ".ods", ".csv", ".docx", ".doc", ".odt", ".pptx", ".ppt", ".odp", ".rtf"),
                    ["libreoffice"]),
    **dict.fromkeys((".mp3", ".mp4", ".wav", ".avi", ".mkv", ".webm", ".ogg", ".flac"), ["vlc"]),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".xcf"), ["gimp"]),
    ".pdf": ["evince"], ".html": ["chromium"],
}


def opener(path: str) -> list[str]:
    """The app ``open`` starts for the file (GNOME's Document Viewer for a PDF, as on the VM; Chromium without it)."""
    argv = OPENERS.get(Path(path).suffix.lower(), ["mousepad"])
    return ["chromium"] if argv == ["evince"] and shutil.which("evince") is None else argv


def _check_open(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    check_home_path(parameters["path"], where, problems)
    if home_path(parameters["path"]) is not None and Path(parameters["path"]).suffix:
        context["programs"].append(opener(parameters["path"])[0])


def _run_open(run: SetupRun, parameters: dict, where: str) -> None:
    path = local_path(parameters["path"], run.desktop.home)
    if path.is_dir():
        argv = ["pcmanfm", str(path)]
    elif not path.exists():
        raise EnvError(f"{where}: there is no {parameters['path']} to open")
    else:
        argv = [*opener(str(path)), str(path)]
    _launch(run.desktop, argv, shell=False, where=where, timeout_s=run.window_timeout_s)
    # the app's first window may be a splash or a frame still loading: wait for the one that shows the file
    deadline = time.monotonic() + run.window_timeout_s
    while not any(path.name in window.title for window in run.desktop.windows()):
        if time.monotonic() > deadline:
            run.note(f"{where}: no window shows {path.name} after {run.window_timeout_s:g} s")
            return
        time.sleep(0.1)


def _run_sleep(run: SetupRun, parameters: dict, where: str) -> None:
    time.sleep(min(float(parameters["seconds"]), 60.0))


def _check_sleep(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    if isinstance(parameters["seconds"], bool) or not isinstance(parameters["seconds"], (int, float)) \
            or parameters["seconds"] < 0:
        problems.add(f"{where}: seconds must be a number of seconds, got {parameters['seconds']!r}")


def _check_files(parameters: dict, where: str, problems: Problems, context: dict, *, key: str) -> None:
    files = parameters["files"]
    if not isinstance(files, list) or not files or not all(
            isinstance(item, dict) and {key, "path"} <= set(item) for item in files):
        problems.add(f"{where}: files must be a list of {{\"{key}\", \"path\"}} objects")
        return
    for item in files:
        check_home_path(item["path"], where, problems)
        if key == "url":
            if not isinstance(item["url"], str) or not item["url"]:
                problems.add(f"{where}: a file's url must be a non-empty string")
            elif home_path(item["path"]) is not None:
                context["files"].append(TaskFile(item["url"], home_path(item["path"]), where))
        else:
            path = (context["cache_dir"] / str(item[key])).resolve()
            if context["cache_dir"].resolve() not in path.parents or not path.is_file():
                problems.add(f"{where}: no file {item[key]!r} in the local cache ({context['cache_dir']})")


def _run_download(run: SetupRun, parameters: dict, where: str) -> None:
    for item in parameters["files"]:
        vm_path = home_path(item["path"])
        source = find_file(run.files, item["url"], vm_path)
        if source is None:  # refused at start; here only when an env is driven by hand
            raise EnvError(f"{where}: the file {Path(vm_path).name} ({item['url'][:80]}) is not in the project's "
                           "file store; upload it on the Tasks page")
        _upload(run.desktop, Path(source), local_path(vm_path, run.desktop.home), where)


def _run_upload(run: SetupRun, parameters: dict, where: str) -> None:
    for item in parameters["files"]:
        _upload(run.desktop, (CACHE_DIR / item["local_path"]).resolve() if not Path(item["local_path"]).is_absolute()
                else Path(item["local_path"]), local_path(item["path"], run.desktop.home), where)


def _upload(desktop: Any, source: Path, target: Path, where: str) -> None:
    """Copy a file into the episode's HOME, owned by the session's uid (folders made as needed)."""
    home = Path(desktop.home).resolve()
    if target != home and home not in target.parents:
        raise EnvError(f"{where}: {target} lies outside the episode's home")
    result = desktop.run(["mkdir", "-p", str(target.parent)])
    if result.returncode != 0:
        raise EnvError(f"{where}: could not make {target.parent}: {result.stderr.strip()}")
    try:
        shutil.copyfile(source, target)
        if os.geteuid() == 0:
            os.chown(target, desktop.uid, desktop.uid)
    except OSError as exc:
        raise EnvError(f"{where}: could not copy {source.name} to {target}: {exc}") from exc


# an app's window that comes before its own (a splash, a frame still loading): a launch waits on for the app's
SPLASHES = {"GIMP Startup", "LibreOffice"}


def _launch(desktop: Any, argv: list[str] | str, *, shell: bool, where: str, timeout_s: float) -> None:
    """Start an app and wait for its window: a new top-level window, or the process handing its
    request to a running instance and leaving with code 0."""
    before = {window.id for window in desktop.windows()}
    log = f"launch-{int(time.monotonic() * 1000)}.log"
    process = desktop.popen(argv, shell=shell, log=log)
    deadline = time.monotonic() + timeout_s
    untitled_until = None  # a splash or a frame not yet titled (LibreOffice's first): its title is waited for a while
    while time.monotonic() < deadline:
        desktop.check_alive()
        new = [window for window in desktop.windows() if window.id not in before]
        titled = [window for window in new if window.title and window.title not in SPLASHES]
        if new and not titled and untitled_until is None:
            untitled_until = time.monotonic() + 10.0
        if titled or (new and time.monotonic() > untitled_until):
            # a window that never takes the focus (a first-run dialog) holds setup up 3 s at most
            _wait_focus(desktop, (titled or new)[-1], min(deadline, time.monotonic() + 3.0))
            return
        code = process.poll()
        if code is not None:
            if code == 0:
                return
            raise EnvError(f"{where}: {argv!r} exited with code {code} before opening a window: "
                           f"{desktop.log_tail(log) or 'no output'}")
        time.sleep(0.03)
    raise EnvError(f"{where}: {argv!r} opened no window in {timeout_s:g} s")


def _wait_focus(desktop: Any, window: Any, deadline: float) -> None:
    """Wait until the new window holds the keyboard focus: openbox gives it a moment after the window
    maps, and keys typed before then are lost (under load, an agent's first ``type`` went nowhere).
    Ask for the focus once if it has not come after 0.3 s; a window that never takes it is left be."""
    asked_at = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        if desktop.has_focus(window):
            return
        if asked_at and time.monotonic() > asked_at:
            desktop.activate(window)
            asked_at = 0.0
        time.sleep(0.02)


# a window OSWorld's tasks name by its app, and the stand-in's name here (programs.py)
STAND_IN_WINDOWS = {"Google Chrome": "Chromium", "google-chrome": "chromium"}


def _find_window(desktop: Any, parameters: dict, timeout_s: float) -> Any:
    strict = bool(parameters.get("strict", False))
    wanted = [parameters["window_name"]]
    wanted += [stand_in for app, stand_in in STAND_IN_WINDOWS.items() if app in wanted[0]][:1]
    by_class = bool(parameters.get("by_class", False))
    deadline = time.monotonic() + timeout_s
    while True:
        for window in desktop.windows():
            name = window.wm_class if by_class else window.title
            if any((name == w) if strict else (w.lower() in name.lower()) for w in wanted):
                return window
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _run_activate(run: SetupRun, parameters: dict, where: str) -> None:
    window = _find_window(run.desktop, parameters, min(run.window_timeout_s, 10.0))
    if window is None:  # OSWorld goes on too
        titles = ", ".join(repr(w.title) for w in run.desktop.windows()) or "none"
        run.note(f"{where}: no window named {parameters['window_name']!r} (windows: {titles})")
        return
    run.desktop.activate(window)
    time.sleep(0.1)


def _run_close(run: SetupRun, parameters: dict, where: str) -> None:
    window = _find_window(run.desktop, parameters, 2.0)
    if window is None:
        run.note(f"{where}: no window named {parameters['window_name']!r} to close")
        return
    run.desktop.close_window(window)
    time.sleep(0.2)


def _check_urls(key: str) -> Callable[[dict, str, Problems, dict], None]:
    def check(parameters: dict, where: str, problems: Problems, context: dict) -> None:
        urls = parameters[key]
        if not isinstance(urls, list) or not all(isinstance(url, str) and url for url in urls):
            problems.add(f"{where}: {key} must be a list of URLs")
    return check


def _run_open_tabs(run: SetupRun, parameters: dict, where: str) -> None:
    chrome.open_tabs(run.desktop, parameters["urls_to_open"], where=where)


def _run_close_tabs(run: SetupRun, parameters: dict, where: str) -> None:
    chrome.close_tabs(run.desktop, parameters["urls_to_close"], where=where)


SETUP_STEPS: dict[str, StepKind] = {
    "launch": StepKind(("command",), _run_launch, _check_launch),
    "execute": StepKind(("command",), _run_command, _check_command),
    "command": StepKind(("command",), _run_command, _check_command),
    "open": StepKind(("path",), _run_open, _check_open),
    "sleep": StepKind(("seconds",), _run_sleep, _check_sleep),
    "activate_window": StepKind(("window_name",), _run_activate),
    "close_window": StepKind(("window_name",), _run_close),
    "upload_file": StepKind(("files",), _run_upload,
                            lambda p, w, pr, c: _check_files(p, w, pr, c, key="local_path")),
    "download": StepKind(("files",), _run_download, lambda p, w, pr, c: _check_files(p, w, pr, c, key="url")),
    "chrome_open_tabs": StepKind(("urls_to_open",), _run_open_tabs, _check_urls("urls_to_open")),
    "chrome_close_tabs": StepKind(("urls_to_close",), _run_close_tabs, _check_urls("urls_to_close")),
}


# steps Loupe cannot offer offline, and why
REFUSED_STEPS = {
    "googledrive": "the googledrive step puts files in a Google Drive account, which Loupe cannot reach (offline, "
                   "and no account); rewrite the task to download its files (the project's file store holds them)",
    "login": "the login step signs Chrome into a Google account, which Loupe cannot do offline",
    "update_browse_history": "the update_browse_history step writes Chrome's history database, which Loupe does not "
                             "support yet",
}
