"""OSWorld's getters (``evaluator.result`` / ``expected``): what a metric compares, read from the episode's desktop.

One registry, ``GETTERS``: a getter's required keys, what it reads, and what the loader checks. Files are returned
as local paths (OSWorld's getters copy them into a cache folder; here they are read where they are, inside the
episode's HOME, or from the project's file store), a missing file as None (the metric then scores 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError
from agent.envs.desktop import chrome
from agent.envs.desktop.osworld_task import TaskFile
from agent.envs.desktop.osworld_time import relative_rules
from agent.envs.desktop.osworld_vm import CACHE_DIR, as_argv, check_home_path, episode_cache, find_file, local_path, \
    map_home

__all__ = ["GETTERS", "REFUSED_GETTERS", "get_state", "accessibility_xml", "terminal_text"]


@dataclass(frozen=True)
class GetterKind:
    required: tuple[str, ...]
    get: Callable[[dict, Any, dict], Any]
    check: Callable[[dict, str, Any, dict], None] = lambda spec, where, problems, context: None


def get_state(spec: dict | None, desktop: Any, *, files: dict | None = None) -> Any:
    if not spec:
        return None
    spec = map_home(spec, desktop.home) if spec["type"] not in ("cloud_file", "cache_file", "rule") else spec
    return GETTERS[spec["type"]].get(spec, desktop, files or {})


def _paths(spec: dict, key: str = "path") -> tuple[list, bool]:
    """A getter's path(s) and whether it gives a list (``multi``, or a list of paths)."""
    value = spec[key]
    many = isinstance(value, list) or bool(spec.get("multi"))
    return (value if isinstance(value, list) else [value]), many


def _gives(spec: dict, values: list) -> Any:
    """OSWorld's ``gives``: which of several files a getter hands on (all by default); one value alone unwrapped."""
    indices = spec.get("gives")
    chosen = [values[i] for i in indices if 0 <= i < len(values)] if isinstance(indices, list) else values
    return chosen[0] if len(chosen) == 1 else chosen


# -- files --------------------------------------------------------------------------------------
def _check_home_paths(spec: dict, where: str, problems: Any, context: dict) -> None:
    for path in _paths(spec)[0]:
        check_home_path(path, where, problems)


def _vm_file(spec: dict, desktop: Any, files: dict) -> Any:
    paths, many = _paths(spec)
    found = []
    for path in paths:
        local = local_path(path, desktop.home)
        found.append(str(local) if local.is_file() else None)
    return _gives(spec, found) if many else found[0]


def _check_cloud(spec: dict, where: str, problems: Any, context: dict) -> None:
    urls, many = _paths(spec)
    dests = spec.get("dest") if isinstance(spec.get("dest"), list) else [spec.get("dest")] * len(urls)
    if len(dests) != len(urls) or not all(isinstance(url, str) and url for url in urls):
        problems.add(f"{where}: path must be a URL or a list of them, with as many dest names")
        return
    for url, dest in zip(urls, dests):
        context["files"].append(TaskFile(url, str(dest or Path(url).name), where))


def _cloud_file(spec: dict, desktop: Any, files: dict) -> Any:
    """A file the task compares with, downloaded by OSWorld, here from the project's file store (refused at start
    when missing: this raises only for an env driven by hand)."""
    urls, many = _paths(spec)
    dests = spec.get("dest") if isinstance(spec.get("dest"), list) else [spec.get("dest")] * len(urls)
    found = []
    for url, dest in zip(urls, dests):
        local = find_file(files, url, str(dest or Path(url).name))
        if local is None:
            raise EnvError(f"the file {dest or url} of the check is not in the project's file store")
        found.append(local)
    return _gives(spec, found) if many else found[0]


def _check_cache(spec: dict, where: str, problems: Any, context: dict) -> None:
    name = spec["path"]
    cache_dir = context["cache_dir"]
    if not isinstance(name, str) or not name:
        problems.add(f"{where}: a cache file's path must be a file name, got {name!r}")
        return
    if name in context["stdout"]:  # written by an execute step's stdout
        return
    path = (cache_dir / name).resolve()
    if cache_dir.resolve() not in path.parents or not path.is_file():
        problems.add(f"{where}: no file {name!r} in the local cache ({cache_dir}), and no setup step writes it "
                     "(an execute step's stdout)")


def _cache_file(spec: dict, desktop: Any, files: dict) -> str | None:
    """A file a setup step wrote (``stdout``: the episode's cache), or one of the local cache (CACHE_DIR)."""
    written = episode_cache(desktop) / spec["path"]
    if written.is_file():
        return str(written)
    shipped = (CACHE_DIR / spec["path"]).resolve()
    return str(shipped) if CACHE_DIR.resolve() in shipped.parents and shipped.is_file() else None


def _tree(path: Path) -> dict:
    """OSWorld's list_directory shape: ``{"type": "directory", "name", "children": [...]}``."""
    children = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.is_dir() and not child.is_symlink():
            children.append(_tree(child))
        else:
            children.append({"type": "file", "name": child.name})
    return {"type": "directory", "name": path.name, "children": children}


def _list_directory(spec: dict, desktop: Any, files: dict) -> dict | None:
    path = local_path(spec["path"], desktop.home)
    return _tree(path) if path.is_dir() else None


# -- commands --------------------------------------------------------------------------------
def _command(spec: dict, desktop: Any, stream: str) -> str:
    result = desktop.run(as_argv(spec["command"], bool(spec.get("shell", False))), timeout_s=30)
    return result.stdout if stream == "stdout" else result.stderr


def terminal_text(log: str) -> str:
    """What a terminal shows, from its typescript: escape sequences and carriage-return overdraws removed."""
    text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]", "", log)
    lines = [line.rsplit("\r", 1)[-1] if not line.endswith("\r") else line.rstrip("\r").rsplit("\r", 1)[-1]
             for line in text.replace("\r\n", "\n").split("\n")]
    return "\n".join(line for line in lines if "\x07" not in line)


def _terminal_output(spec: dict, desktop: Any, files: dict) -> str | None:
    """The text of the open terminal (OSWorld reads GNOME Terminal's through AT-SPI): here the typescript the
    session's terminal writes (session.py's ``x-terminal-emulator``), the newest one."""
    logs = sorted(Path(desktop.runtime).glob("terminal-*.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return None
    return terminal_text(logs[-1].read_text(errors="replace"))


def _accessibility_tree(spec: dict, desktop: Any, files: dict) -> str:
    return accessibility_xml(desktop.accessibility_nodes())


def accessibility_xml(walk: dict) -> str:
    """The walked nodes as nested XML, one tag a role (``<push-button name="OK">text</push-button>``), close to
    OSWorld's tree, so selectors (``application[name=Thunderbird] push-button[name="OK"]``) and include / exclude
    checks can name a role and its text; a ``desktop-frame`` root holds the applications."""
    from xml.sax.saxutils import escape, quoteattr

    nodes = walk["nodes"]
    children: dict[int, list[dict]] = {}
    for node in nodes:
        children.setdefault(node["parent"], []).append(node)

    def render(node: dict) -> str:
        tag = re.sub(r"[^a-z0-9-]", "-", node.get("role", "unknown").lower()) or "unknown"
        inner = escape(node.get("text", "")) + "".join(render(child) for child in children.get(node["id"], []))
        return f"<{tag} name={quoteattr(node.get('name', ''))}>{inner}</{tag}>"

    return "".join(render(node) for node in children.get(-1, []))


# -- apps ----------------------------------------------------------------------------------------
def _vlc_config(spec: dict, desktop: Any, files: dict) -> str | None:
    path = Path(desktop.home) / ".config" / "vlc" / "vlcrc"
    return str(path) if path.is_file() else None


def _vlc_playing_info(spec: dict, desktop: Any, files: dict) -> str | None:
    """VLC's status.xml from its HTTP interface (the session's ``vlc`` starts it on 127.0.0.1:8080, password
    "password", as OSWorld's VM does), fetched inside the sandbox; None when VLC does not answer."""
    script = ("import base64,sys,urllib.request as u\n"
              "r=u.Request('http://127.0.0.1:8080/requests/status.xml',headers={'Authorization':'Basic '+"
              "base64.b64encode(b':password').decode()})\n"
              "try: sys.stdout.write(u.urlopen(r,timeout=5).read().decode())\nexcept Exception: sys.exit(1)")
    result = desktop.run(["python3", "-c", script], timeout_s=15)
    if result.returncode != 0 or not result.stdout.strip():
        return None
    path = episode_cache(desktop) / str(spec.get("dest") or "status.xml")
    path.write_text(result.stdout)
    return str(path)


def _vscode_config(spec: dict, desktop: Any, files: dict) -> Any:
    """OSWorld runs an extension's command in VS Code (ctrl+shift+p, its name, enter), then reads the file it
    wrote."""
    desktop.type_keys([("hotkey", "ctrl+shift+p"), ("type", spec["vscode_extension_command"]), ("hotkey", "Return")])
    import time

    time.sleep(1.0)
    return _vm_file({"path": spec["path"]}, desktop, files)


def _chrome(name: str) -> Callable[[dict, Any, dict], Any]:
    def get(spec: dict, desktop: Any, files: dict) -> Any:
        return getattr(chrome, name)(desktop, spec)
    return get


def _rule(spec: dict, desktop: Any, files: dict) -> Any:
    return spec["rules"]


def _rule_relative_time(spec: dict, desktop: Any, files: dict) -> Any:
    return relative_rules(spec["rules"])


GETTERS: dict[str, GetterKind] = {
    "rule": GetterKind(("rules",), _rule),
    "rule_relativeTime": GetterKind(("rules",), _rule_relative_time),
    "vm_file": GetterKind(("path",), _vm_file, _check_home_paths),
    "cloud_file": GetterKind(("path",), _cloud_file, _check_cloud),
    "cache_file": GetterKind(("path",), _cache_file, _check_cache),
    "list_directory": GetterKind(("path",), _list_directory, _check_home_paths),
    "vm_command_line": GetterKind(("command",), lambda spec, desktop, files: _command(spec, desktop, "stdout")),
    "vm_command_error": GetterKind(("command",), lambda spec, desktop, files: _command(spec, desktop, "stderr")),
    "vm_terminal_output": GetterKind((), _terminal_output),
    "accessibility_tree": GetterKind((), _accessibility_tree),
    "vlc_config": GetterKind((), _vlc_config),
    "vlc_playing_info": GetterKind((), _vlc_playing_info),
    "vscode_config": GetterKind(("vscode_extension_command", "path"), _vscode_config, _check_home_paths),
    "enable_do_not_track": GetterKind((), _chrome("enable_do_not_track")),
    "open_tabs_info": GetterKind((), _chrome("open_tabs_info")),
    "page_info": GetterKind(("url",), _chrome("page_info")),
    "active_tab_url_parse": GetterKind(("parse_keys",), _chrome("active_tab_url_parse")),
    "active_tab_html_parse": GetterKind(("category",), _chrome("active_tab_html_parse")),
    "active_url_from_accessTree": GetterKind((), _chrome("active_url")),
    "active_tab_info": GetterKind((), _chrome("active_tab_info")),
    "url_dashPart": GetterKind(("partIndex", "returnType"), _chrome("url_dash_part")),
}
REFUSED_GETTERS = {
    "googledrive_file": "the googledrive_file getter reads a Google Drive account, which Loupe cannot reach offline",
    "calc_insensitive_md5": "the calc_insensitive_md5 getter is named by this task but OSWorld's own code has no "
                            "such getter, so what it computes is not defined",
}

