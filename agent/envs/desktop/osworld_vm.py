"""The OSWorld VM's places on an episode's desktop: its home (``/home/user``, ``~``) mapped onto the episode's HOME,
the files a task brings (the project's file store, the local cache), and a task's command as the VM would run it.
Setup steps (osworld_setup.py) and getters (osworld_getters.py) both stand on these."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError
from agent.envs.desktop.osworld_task import Problems

__all__ = ["CACHE_DIR", "VM_HOME", "as_argv", "check_home_path", "episode_cache", "find_file", "home_path",
           "local_path", "map_home"]

VM_HOME = "/home/user"
CACHE_DIR = Path(__file__).with_name("cache")


def home_path(path: Any) -> str | None:
    """``path`` as a VM path in the home (``/home/user/...``), or None when it lies elsewhere. A relative path is
    OSWorld's server's working folder, the home."""
    if not isinstance(path, str) or not path or "\\" in path or (len(path) > 1 and path[1] == ":"):
        return None
    if path == VM_HOME or path.startswith(VM_HOME + "/"):
        return path
    if path == "~" or path.startswith("~/"):
        return VM_HOME + path[1:]
    if not path.startswith("/"):
        return f"{VM_HOME}/{path}"
    return None


def check_home_path(path: Any, where: str, problems: Problems) -> None:
    if home_path(path) is None:
        windows = isinstance(path, str) and ("\\" in path or (len(path) > 1 and path[1] == ":"))
        problems.add(f"{where}: path {path!r} " + ("is a Windows path; this desktop is Linux" if windows else
                                                   f"must lie in the VM's home ({VM_HOME}/... or ~/...)"))


def map_home(value: Any, home: Path) -> Any:
    """Every ``/home/user`` and leading ``~/`` in a (nested) value, rewritten onto ``home``."""
    if isinstance(value, str):
        mapped = value.replace(VM_HOME, str(home))
        return str(home) + mapped[1:] if mapped.startswith("~/") else mapped
    if isinstance(value, list):
        return [map_home(item, home) for item in value]
    if isinstance(value, dict):
        return {key: map_home(item, home) for key, item in value.items()}
    return value


def local_path(path: str, home: Path) -> Path:
    """A VM path of the home (or a relative one) as the episode's file; EnvError when it lies outside the home."""
    vm = home_path(path) if not path.startswith(str(home)) else path
    if vm is None:
        raise EnvError(f"{path} lies outside the VM's home; the env will not touch it")
    resolved = Path(map_home(vm, home)).resolve()
    if resolved != home.resolve() and home.resolve() not in resolved.parents:
        raise EnvError(f"{path} resolves outside the episode's home ({resolved}); the env will not touch it")
    return resolved


def find_file(files: dict, url: str, path: str) -> str | None:
    """The local copy of the file at ``url`` for ``path``: the store's entry for that target path, else its entry
    for any path (``(url, "")``)."""
    found = files.get((url, path)) or files.get((url, ""))
    return str(found) if found else None


def episode_cache(desktop: Any) -> Path:
    folder = Path(desktop.runtime) / "osworld-cache"
    folder.mkdir(exist_ok=True)
    return folder


def as_argv(command: Any, shell: bool) -> list[str]:
    """A task's command as the argv OSWorld's VM runs: a shell line through /bin/sh (Python's ``shell=True``: dash,
    whose ``echo -e`` prints "-e", as on the VM), else the words (a string split as a shell would)."""
    if shell:
        return ["/bin/sh", "-c", command if isinstance(command, str) else shlex.join(map(str, command))]
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
