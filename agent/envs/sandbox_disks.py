"""A sandbox's home on a disk of its own (root only): a tmpfs of the sandbox's ``disk_mb``, mounted in the worker's own
view, so the env reads and writes the home as before and the sandbox can fill no more than that. Homes a dead worker
left mounted are swept at the first mount of the next."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from agent.envs.base import SandboxUnavailable

__all__ = ["mount_disk", "unmount_disk"]


_DISK_SOURCE = "loupe-sandbox"


_disks_swept = False


def mount_disk(path: Path, *, uid: int | None, size_mb: int) -> None:
    """Make the folder ``path`` a tmpfs of ``size_mb`` owned by ``uid`` (root only): a sandbox's home then holds at
    most that. Mounted in the worker's own view, so the env reads and writes the home as before; the mount's source
    names this process, so a later one unmounts it if this one died first."""
    global _disks_swept
    if not _disks_swept:
        _disks_swept = True
        _sweep_disks()
    owner = uid if uid is not None else os.getuid()
    options = f"size={size_mb}m,mode=0700,uid={owner},gid={owner},nosuid,nodev"
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, f"{_DISK_SOURCE}-{os.getpid()}", str(path)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SandboxUnavailable(f"the sandbox's home could not be made ({result.stderr.strip() or result.returncode})")


def unmount_disk(path: Path) -> None:
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True)


def _sweep_disks() -> None:
    """Unmount the homes of sandboxes whose worker process died without unmounting them."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = right.split()
        if len(fields) < 2 or fields[0] != "tmpfs" or not fields[1].startswith(f"{_DISK_SOURCE}-"):
            continue
        try:
            pid = int(fields[1].rsplit("-", 1)[1])
        except ValueError:
            continue
        if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
            point = left.split()[4].encode().decode("unicode_escape")  # mountinfo escapes spaces as \040
            unmount_disk(Path(point))
            shutil.rmtree(point, ignore_errors=True)
