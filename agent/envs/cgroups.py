"""Cgroups for the environments' sandboxes (sandbox.py): CPU, memory and process limits, what limit was hit, and
killing every process of one.

A sandbox's cgroup is made under the worker's own in each cgroup v1 hierarchy, or beside it under cgroup v2 (v2 keeps
processes out of a cgroup whose children have controllers); a cgroup a dead worker left is removed by the next one.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError

__all__ = ["Cgroup", "CgroupUnavailable", "next_name"]

MB = 2**20


class CgroupUnavailable(EnvError):
    """No cgroup with the limits can be made here; the message says why."""


_counter = 0
_counter_lock = threading.Lock()


def next_name(kind: str) -> str:
    """A cgroup name no other of this machine's sandboxes has: its kind, this process, a counter."""
    global _counter
    with _counter_lock:
        _counter += 1
        return f"loupe-{kind}-{os.getpid()}-{_counter}"


class Cgroup:
    """A cgroup with a sandbox's limits, made beside (v2) or under (v1) the worker's own, removed by ``remove``."""

    V1_CONTROLLERS = ("memory", "pids", "cpu", "freezer")
    _swept = False

    def __init__(self, name: str, limits: Any) -> None:
        """``limits``: a sandbox.Limits (cpus, memory_mb, pids)."""
        self.name, self.limits = name, limits
        self.dirs: dict[str, Path] = {}  # controller -> its folder (v2: one folder for all)
        self.version = ""
        self._seen = {"pids": 0, "oom": 0}

    # which hierarchy, and where the worker sits in it
    @staticmethod
    def _mounts() -> dict[str, Path]:
        """Controller (or "unified") -> where its hierarchy is mounted."""
        found: dict[str, Path] = {}
        with open("/proc/self/mountinfo") as mountinfo:
            for line in mountinfo:
                left, _, right = line.partition(" - ")
                fstype, _, options = right.split()[:3]
                point = Path(left.split()[4])
                if fstype == "cgroup2":
                    found["unified"] = point
                elif fstype == "cgroup":
                    for option in options.split(","):
                        if option in Cgroup.V1_CONTROLLERS:
                            found[option] = point
        return found

    @staticmethod
    def _own() -> dict[str, str]:
        """Controller (or "unified") -> the worker's cgroup path in that hierarchy."""
        own: dict[str, str] = {}
        with open("/proc/self/cgroup") as cgroups:
            for line in cgroups:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in (controllers.split(",") if controllers else ["unified"]):
                    own[controller] = path
        return own

    @classmethod
    def _parents(cls) -> tuple[str, dict[str, Path], str]:
        """(version, controller -> the folder new cgroups go in, why none when none)."""
        mounts, own = cls._mounts(), cls._own()
        v1 = {c: mounts[c] / own[c].lstrip("/") for c in ("memory", "pids", "cpu") if c in mounts and c in own}
        if len(v1) == 3:
            if "freezer" in mounts and "freezer" in own:
                v1["freezer"] = mounts["freezer"] / own["freezer"].lstrip("/")
            return "v1", v1, ""
        if "unified" in mounts and "unified" in own:
            mine = mounts["unified"] / own["unified"].lstrip("/")
            # v2 keeps processes out of a cgroup whose children have controllers: a sandbox's cgroup goes beside the
            # worker's, under a parent that already hands memory, pids and cpu down to its children
            try:
                available = set((mine / "cgroup.controllers").read_text().split())
            except OSError as exc:
                return "", {}, f"cgroup v2 unreadable ({exc})"
            if {"memory", "pids", "cpu"} <= available and mine != mounts["unified"]:
                return "v2", {"unified": mine.parent}, ""
            return "", {}, ("cgroup v2 gives this process no memory, pids and cpu controllers to hand down (a "
                            "container's own root cgroup): limits are rlimits")
        return "", {}, "no cgroup memory, pids and cpu controllers are mounted: limits are rlimits"

    @classmethod
    def probe(cls, limits: Any) -> tuple[str, str]:
        """(version or "", why not) for this process, checked by making and removing one cgroup with ``limits``."""
        try:
            version, _, reason = cls._parents()
            if not version:
                return "", reason
            probe = cls(next_name("probe"), limits)
            probe.create()
            probe.remove()
            return version, ""
        except OSError as exc:
            return "", f"cgroups cannot be made here ({exc}): limits are rlimits"

    def create(self) -> None:
        version, parents, reason = self._parents()
        if not version:
            raise CgroupUnavailable(reason)
        self.version = version
        if not Cgroup._swept:
            Cgroup._swept = True
            self._sweep(parents)
        if version == "v1":
            for controller, parent in parents.items():
                self.dirs[controller] = parent / self.name
                self.dirs[controller].mkdir(exist_ok=True)
            memory = str(self.limits.memory_mb * MB)
            self._write("memory", "memory.limit_in_bytes", memory)
            if (self.dirs["memory"] / "memory.memsw.limit_in_bytes").exists():  # swap counted (when accounted)
                self._write("memory", "memory.memsw.limit_in_bytes", memory)
            self._write("pids", "pids.max", str(self.limits.pids))
            self._write("cpu", "cpu.cfs_period_us", "100000")
            self._write("cpu", "cpu.cfs_quota_us", str(int(self.limits.cpus * 100000)))
            # a cgroup competes as one process would: weigh it as the cores it may use (its processes each had a
            # weight of their own before, as autogroups)
            self._write("cpu", "cpu.shares", str(int(self.limits.cpus * 1024)))
        else:
            folder = parents["unified"] / self.name
            folder.mkdir(exist_ok=True)
            self.dirs = {"unified": folder}
            self._write("unified", "memory.max", str(self.limits.memory_mb * MB))
            if (folder / "memory.swap.max").exists():
                self._write("unified", "memory.swap.max", "0")
            self._write("unified", "pids.max", str(self.limits.pids))
            self._write("unified", "cpu.max", f"{int(self.limits.cpus * 100000)} 100000")
            self._write("unified", "cpu.weight", str(min(10000, max(1, int(self.limits.cpus * 100)))))

    def _write(self, controller: str, name: str, value: str) -> None:
        (self.dirs[controller] / name).write_text(value)

    def _read(self, controller: str, name: str) -> str:
        try:
            return (self.dirs[controller] / name).read_text()
        except (OSError, KeyError):
            return ""

    @staticmethod
    def _field(text: str, key: str) -> int:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key and parts[1].isdigit():
                return int(parts[1])
        return 0

    def _counts(self) -> dict[str, int]:
        if self.version == "v1":
            return {"pids": self._field(self._read("pids", "pids.events"), "max"),
                    "oom": self._field(self._read("memory", "memory.oom_control"), "oom_kill")}
        return {"pids": self._field(self._read("unified", "pids.events"), "max"),
                "oom": self._field(self._read("unified", "memory.events"), "oom_kill")}

    def breach(self) -> str:
        """What limit was hit since the last call ("" when none), for a person: the episode's failure says it."""
        counts = self._counts()
        said = []
        if counts["pids"] > self._seen["pids"]:
            said.append(f"it hit its process limit ({self.limits.pids} processes and threads)")
        if counts["oom"] > self._seen["oom"]:
            said.append(f"it ran out of memory (its limit is {self.limits.memory_mb} MB) and a process was killed")
        self._seen = counts
        return "; ".join(said)

    def join_prefix(self) -> list[str]:
        """An argv prefix that moves the process into this cgroup, then runs the rest (``sh``: about a millisecond)."""
        files = [folder / "cgroup.procs" for folder in self.dirs.values()]
        script = " && ".join(f'echo $$ > "{path}"' for path in files) + ' && exec "$@"'
        return ["/bin/sh", "-c", script, "loupe-sandbox"]

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder in self.dirs.values():
            try:
                found |= {int(pid) for pid in (folder / "cgroup.procs").read_text().split()}
            except OSError:
                continue
        return sorted(found)

    def kill_all(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the cgroup (frozen first where a freezer is, so a fork bomb cannot outrun it)."""
        if self.version == "v2" and (self.dirs["unified"] / "cgroup.kill").exists():
            self._write("unified", "cgroup.kill", "1")
        freezer = self.dirs.get("freezer")
        deadline = time.monotonic() + timeout_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            if freezer is not None:
                (freezer / "freezer.state").write_text("FROZEN")
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            if freezer is not None:
                (freezer / "freezer.state").write_text("THAWED")
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for folder in self.dirs.values():
            for _ in range(100):  # the killed take a moment to leave
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.dirs = {}

    @staticmethod
    def _sweep(parents: dict[str, Path]) -> None:
        """Remove the cgroups of sandboxes whose worker process died without removing them."""
        for parent in parents.values():
            for folder in parent.glob("loupe-*-*-*"):
                try:
                    pid = int(folder.name.split("-")[2])
                except (IndexError, ValueError):
                    continue
                if pid == os.getpid() or Path(f"/proc/{pid}").exists():
                    continue
                try:
                    for line in (folder / "cgroup.procs").read_text().split():
                        os.kill(int(line), 9)
                    folder.rmdir()
                except OSError:
                    pass
