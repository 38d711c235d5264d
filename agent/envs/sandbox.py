"""Sandboxes: what an environment runs (a desktop's apps, its setup and checker commands, a terminal's commands, a
browser) reaches none of Loupe's data or services.

A ``Sandbox`` is one confinement, made with bubblewrap (``bwrap``, the sandbox Flatpak uses), whose namespaces every
process of the env enters (``command(argv)``: the argv prefixed with what joins the cgroup, enters the namespaces with
``nsenter`` and drops to the sandbox's uid with ``setpriv``):

- **network**: a namespace of its own with only a loopback interface. Loupe's Redis, PostgreSQL and web server, other
  envs' sites and anything else on the host are not there to connect to. What a task needs is served inside it (a
  browser's MiniWoB pages, shop and wiki: ``listen``) or reached through the env's allow-listed proxy (egress.py).
- **files**: the system read-only; Loupe's data (``LOUPE_DATA_DIR`` and its media, checkpoints, logs and sites, where
  they live elsewhere) and ``/run`` (PostgreSQL's, Redis's and Docker's sockets) under empty tmpfs; ``/tmp``,
  ``/var/tmp`` and ``/dev/shm`` its own, of ``disk_mb`` each (other displays' X sockets and other sessions' files are
  not in them); writable only those and what it is given (``binds``: its home).
- **processes**: a pid namespace (it sees its own processes only, and they all die with it), and, when Loupe runs as
  root, a uid of its own, with no capabilities and no new privileges (setuid binaries do not raise it).
- **limits** (``Limits``, ``LOUPE_SANDBOX_*``): a cgroup (cgroups.py; v1, or v2 where one can be made) with a CPU
  quota, a memory limit (swap included) and a process-count limit; under root its home is a tmpfs of its own size;
  where no cgroup can be made, rlimits (``prlimit``: processes of the uid, address space, file size) instead. Each
  command keeps its caller's time limit.

Where namespaces cannot be made (a container without CAP_SYS_ADMIN, a kernel without user namespaces) ``support()``
says why, once; the desktop and terminal envs then refuse to start with that reason, never running unconfined.

Its cgroup is cgroups.py; its home's disk, sandbox_disks.py.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.envs.base import EnvError, SandboxUnavailable
from agent.envs.cgroups import Cgroup, CgroupUnavailable
from agent.envs.sandbox_disks import mount_disk, unmount_disk

__all__ = ["Limits", "Sandbox", "SandboxUnavailable", "Support", "allocate_uid", "hidden_paths", "kill_group",
           "support"]

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
HELPER = Path(__file__).with_name("sandbox_helper.py")
MB = 2**20


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use. ``cpus``: cores' worth of CPU time (a quota); ``memory_mb``: resident memory and swap
    of all its processes (a memory hog is killed); ``pids``: processes and threads (a fork bomb stops there);
    ``disk_mb``: the size of its home (under root: a tmpfs of its own), of its /tmp, /var/tmp and /dev/shm each, and,
    without cgroups, of each file it writes (rlimits then, of each process: address space ``memory_mb``, file size
    ``disk_mb``). What it keeps in those tmpfs counts against its memory too."""

    cpus: float = 2.0  # a browser's bursts use more than one core (agent/README.md, "Measured")
    memory_mb: int = 2048
    pids: int = 512
    disk_mb: int = 1024

    @classmethod
    def from_env(cls) -> Limits:
        """The limits set by LOUPE_SANDBOX_CPUS / _MEMORY_MB / _PIDS / _DISK_MB (README, configuration); EnvError
        naming the setting when one is not a positive number (the env, and its episode, cannot start so)."""
        values = {}
        for name, kind in (("cpus", float), ("memory_mb", int), ("pids", int), ("disk_mb", int)):
            key = f"LOUPE_SANDBOX_{name.upper()}"
            raw = os.environ.get(key, "").strip()
            if not raw:
                continue
            try:
                value = kind(raw)
            except ValueError:
                raise EnvError(f"{key}={raw!r} is not a {'number' if kind is float else 'whole number'}") from None
            if value <= 0:
                raise EnvError(f"{key}={raw!r} must be above 0")
            values[name] = value
        return cls(**values)


# -- what this machine allows ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Support:
    namespaces: bool
    per_uid: bool  # root: each sandbox under a uid of its own
    cgroups: str  # "v1", "v2", or "" (rlimits instead)
    reason: str = ""  # why namespaces (or cgroups) are missing, for a person


_support: Support | None = None

# bwrap's words when a host mount vanished while it copied the mounts (see Sandbox.start), and how often to try
_MOUNT_RACE = "Unable to apply mount flags"
_MOUNT_RACE_TRIES = 5

_support_lock = threading.Lock()


def _bwrap_base(as_root: bool) -> list[str]:
    # no --die-with-parent: it is tied to the thread that started bwrap; the holder's end of a pipe ends the sandbox
    # when the worker does, from whichever thread it was made. Without root, /dev is the host's (bound): a new one
    # needs devpts, for which bwrap nests a second user namespace, and nsenter could not then join the network one.
    return ["bwrap", "--unshare-net", "--unshare-pid", *([] if as_root else ["--unshare-user"]),
            "--ro-bind", "/", "/", *(["--dev", "/dev"] if as_root else ["--dev-bind", "/dev", "/dev"]),
            "--proc", "/proc"]


def support() -> Support:
    """What sandboxes this machine can make (probed once a process: a bwrap that starts and exits, about 10 ms)."""
    global _support
    with _support_lock:
        if _support is None:
            _support = _probe()
            if not _support.namespaces:
                log.warning("No sandbox can be made here: %s", _support.reason)
            elif not _support.cgroups:
                log.warning("Sandboxes are limited by rlimits only: %s", _support.reason)
        return _support


def _probe() -> Support:
    root = os.geteuid() == 0
    missing = [tool for tool in ("bwrap", "nsenter", "setpriv") if shutil.which(tool) is None]
    if missing:
        return Support(False, False, "", f"{', '.join(missing)} not installed (Debian packages bubblewrap, util-linux; "
                                         "make env-tools installs them)")
    for attempt in range(1, _MOUNT_RACE_TRIES + 1):
        try:
            probe = subprocess.run([*_bwrap_base(root), "--", "true"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Support(False, False, "", f"bubblewrap could not run: {exc}")
        if probe.returncode == 0 or _MOUNT_RACE not in probe.stderr:
            break
        time.sleep(0.05 * attempt)  # a host mount vanished while bwrap copied them (see Sandbox.start): not a "no"
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]
        hint = ("run the worker as root with CAP_SYS_ADMIN and CAP_NET_ADMIN (docker: cap_add SYS_ADMIN, NET_ADMIN)"
                if root else "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), or run "
                             "the worker as root")
        return Support(False, False, "", f"network namespaces cannot be made ({why}); {hint}")
    version, reason = Cgroup.probe(Limits()) if root else ("", "cgroups need root")
    return Support(True, root, version, reason)


def hidden_paths() -> list[Path]:
    """Loupe's own folders, hidden from every sandbox: its data (secret key, embedded PostgreSQL and Redis, media,
    logs, checkpoints, the sites' builds) wherever the settings put them, and /run."""
    data = Path(os.environ.get("LOUPE_DATA_DIR") or REPO / ".data")
    paths = [data, Path("/run")]
    for key in ("LOUPE_MEDIA_ROOT", "LOUPE_CHECKPOINT_DIR", "LOUPE_LOG_DIR", "LOUPE_SITES_DIR"):
        if os.environ.get(key):
            paths.append(Path(os.environ[key]))
    if os.geteuid() != 0 and os.environ.get("HOME", "/") != "/":  # the sandbox is Loupe's own user: hide its home
        paths.append(Path(os.environ["HOME"]))
    found: list[Path] = []
    for path in paths:
        try:
            resolved = path.resolve()
        except OSError:
            continue
        if resolved.is_dir() and resolved != Path("/") and resolved not in found:
            found.append(resolved)
    return found


def code_paths() -> list[Path]:
    """The folders of Loupe's code and Python that a private or hidden folder would keep from a sandbox (a checkout
    under /tmp, a venv or interpreter under the worker's own home), to be bound back read-only: the sandbox's holder
    is this Python running agent/envs/sandbox_helper.py."""
    covering = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), *hidden_paths()]
    found: list[Path] = []
    for path in (REPO, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).resolve().parents[1]):
        path = path.resolve()
        if any(path == c or c in path.parents for c in covering) and path not in found \
                and not any(f in path.parents for f in found):
            found.append(path)
    return found


# -- uids ------------------------------------------------------------------------------------------------------------
UID_RANGE = range(62000, 64000)  # terminals' and browsers' (desktops use 61000 + their display number)
_uid_dir = Path(tempfile.gettempdir()) / "loupe-sandbox-uids"


class _UidLease:
    def __init__(self, uid: int, lock: int) -> None:
        self.uid, self._lock = uid, lock

    def release(self) -> None:
        if self._lock >= 0:
            os.close(self._lock)
            self._lock = -1


def allocate_uid() -> _UidLease:
    """A uid no other live sandbox on this machine holds (a lock file a uid, held while the lease lives)."""
    _uid_dir.mkdir(mode=0o700, exist_ok=True)
    start = (os.getpid() * 7) % len(UID_RANGE)  # processes start their search apart
    for offset in range(len(UID_RANGE)):
        uid = UID_RANGE[(start + offset) % len(UID_RANGE)]
        fd = os.open(_uid_dir / str(uid), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return _UidLease(uid, fd)
    raise SandboxUnavailable(f"every sandbox uid ({UID_RANGE.start}-{UID_RANGE.stop - 1}) is in use")


# -- the sandbox -----------------------------------------------------------------------------------------------------
@dataclass
class Sandbox:
    """One confinement (see the module docstring). ``binds``: folders it may write (made beforehand, owned by its uid);
    the first is its home, which under root becomes a tmpfs of ``limits.disk_mb`` (mounted where the worker sees it
    too, from ``start`` to ``close``: files written into it before ``start`` are hidden). ``ro_binds``: files or
    folders it may read that its private /tmp would hide (an X display's socket). ``uid``: the uid it runs as (root
    only; None: Loupe's own). ``broker``: keep a helper inside that makes sockets in the network namespace
    (``listen``, ``connect``), for browsers' sites and proxies."""

    name: str
    binds: list[Path] = field(default_factory=list)
    ro_binds: list[Path] = field(default_factory=list)
    uid: int | None = None
    limits: Limits = field(default_factory=Limits)
    broker: bool = False

    def __post_init__(self) -> None:
        self.pid: int | None = None  # the namespaces' first process (bwrap's init), which nsenter joins
        self.cgroup: Cgroup | None = None
        self.disk: Path | None = None  # the home's tmpfs, while mounted
        self._bwrap: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()

    # lifecycle
    def start(self) -> None:
        """Make the namespaces (and the cgroup); SandboxUnavailable says why when they cannot be made."""
        found = support()
        if not found.namespaces:
            raise SandboxUnavailable(f"no sandbox can be made on this machine: {found.reason}")
        if self.uid is not None and not found.per_uid:
            raise SandboxUnavailable("a sandbox uid needs root")
        if self.binds and found.per_uid:
            mount_disk(self.binds[0], uid=self.uid, size_mb=self.limits.disk_mb)
            self.disk = self.binds[0]
        if found.cgroups:
            self.cgroup = Cgroup(self.name, self.limits)
            try:
                self.cgroup.create()
            except (OSError, CgroupUnavailable) as exc:
                self.close()  # the home's disk, and what of the cgroup was made
                raise SandboxUnavailable(f"the sandbox's cgroup could not be made: {exc}") from exc
        argv = _bwrap_base(found.per_uid)
        size = str(self.limits.disk_mb * MB)
        # Mounts go shallowest first, so a deeper one lands on top: the private /tmp, then Loupe's code where a
        # private or hidden folder holds it (a checkout under /tmp, a Python under the worker's hidden home: the
        # sandbox's own holder runs from there), then its data hidden again inside it.
        mounts = [(Path(private), ["--perms", "1777", "--size", size, "--tmpfs", private])
                  for private in ("/tmp", "/var/tmp", "/dev/shm")]
        mounts += [(hidden, ["--perms", "0755", "--tmpfs", str(hidden)]) for hidden in hidden_paths()]
        for code in code_paths():
            mounts += [(parent, ["--perms", "0755", "--dir", str(parent)]) for parent in code.parents
                       if parent != Path("/") and not _visible_dir(parent)]  # bwrap would make them 0700
            mounts.append((code, ["--ro-bind", str(code), str(code)]))
        for _, mount in sorted(mounts, key=lambda item: len(item[0].parts)):
            argv += mount
        made: set[Path] = set()
        for path in [*self.binds, *self.ro_binds]:
            for parent in reversed(path.parents):  # bwrap would make them 0700, and the uid could not pass
                if parent != Path("/") and parent not in made and not _visible_dir(parent):
                    argv += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
        for path in self.binds:
            argv += ["--bind", str(path), str(path)]
        for path in self.ro_binds:
            argv += ["--ro-bind", str(path), str(path)]
        if found.per_uid:
            argv += ["--cap-drop", "ALL"]
        prefix = self.cgroup.join_prefix() if self.cgroup else []
        for attempt in range(1, _MOUNT_RACE_TRIES + 1):
            error = self._launch([*prefix, *argv])
            if error is None:
                return
            if _MOUNT_RACE not in error or attempt == _MOUNT_RACE_TRIES:
                break
            # bwrap copies the host's mounts and then remounts each read-only; where the host's mounts propagate
            # (a shared /), one unmounted meanwhile (another sandbox's home, as it ends) vanishes between the two
            # and its remount fails. Nothing of this sandbox was the cause: make it again.
            log.info("Sandbox %s: a host mount changed while bubblewrap copied them (%s); trying again", self.name,
                     error)
            time.sleep(0.05 * attempt)
        self.close()
        raise SandboxUnavailable(f"bubblewrap did not make the sandbox: {error or 'no word from it'}")

    def _launch(self, argv: list[str]) -> str | None:
        """Start bubblewrap (``argv`` up to the holder) and wait until the sandbox is made: None, or bwrap's error
        (its process is then gone; the home's disk and the cgroup stay for another try)."""
        info_read, info_write = os.pipe()
        argv = [*argv, "--info-fd", str(info_write)]
        if self.broker:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            holder, stdin = [sys.executable, "-I", "-S", str(HELPER)], theirs.fileno()
        else:
            ours = theirs = None
            # exits, and takes the sandbox with it, when its stdin closes (the env closed it, or the worker died)
            holder, stdin = ["/bin/sh", "-c", "echo ready && exec cat"], subprocess.PIPE
        try:
            # the worker's environment (its URLs and keys) stays out of the sandbox, the holder's included
            bwrap = subprocess.Popen([*argv, "--", *holder], stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, pass_fds=(info_write,), start_new_session=True,
                                     env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"})
        except OSError as exc:
            os.close(info_read)
            if ours is not None:
                ours.close()
            self.close()
            raise SandboxUnavailable(f"bubblewrap could not start: {exc}") from exc
        finally:
            os.close(info_write)
            if theirs is not None:
                theirs.close()
        with os.fdopen(info_read, "rb") as info:
            raw = info.read()  # bwrap writes it once the namespaces exist, then closes it
        # the holder says "ready" once bwrap has made the sandbox's files (after the info): a process that entered
        # before then would see them half made
        ready = bwrap.stdout.readline() if raw else b""
        try:
            pid = int(json.loads(raw)["child-pid"])
            if ready.strip() != b"ready":
                raise ValueError("not ready")
        except (ValueError, KeyError, TypeError):
            try:
                bwrap.wait(timeout=5)
                error = bwrap.stderr.read().decode(errors="replace").strip()
            except subprocess.TimeoutExpired:  # up, but never ready: ended here
                error = "it made no sandbox in 5 s"
                bwrap.kill()
                bwrap.wait()
            for stream in (bwrap.stdin, bwrap.stdout, bwrap.stderr):
                if stream is not None:
                    stream.close()
            if ours is not None:
                ours.close()
            return error
        self._bwrap, self._control, self.pid = bwrap, ours, pid
        return None

    def alive(self) -> bool:
        return self._bwrap is not None and self._bwrap.poll() is None

    def close(self) -> None:
        """End the sandbox: its holder exits, and every process in its pid namespace is killed with it."""
        bwrap, self._bwrap = self._bwrap, None
        if self._control is not None:
            self._control.close()
            self._control = None
        if bwrap is not None:
            if bwrap.stdin is not None:
                bwrap.stdin.close()
            try:
                bwrap.wait(timeout=2)
            except subprocess.TimeoutExpired:
                bwrap.kill()
                bwrap.wait()
            for stream in (bwrap.stdout, bwrap.stderr):
                if stream is not None:
                    stream.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.disk is not None:
            unmount_disk(self.disk)
            self.disk = None
        self.pid = None

    # processes
    def command(self, argv: list[str], *, cwd: Path | None = None, network_only: bool = False) -> list[str]:
        """``argv`` as run in the sandbox: in its cgroup and namespaces, as its uid, in ``cwd`` (its view of the files).
        ``network_only``: only its network namespace, as Loupe's own user with Loupe's files (the servers of a
        browser's sites, which the browser reaches there)."""
        if self.pid is None:
            raise EnvError(f"the sandbox {self.name} is not started")
        root = support().per_uid
        enter = ["nsenter", "-t", str(self.pid), "--net"]
        if not root:
            enter += ["--user", "--preserve-credentials"]
        if network_only:
            return [*enter, "--", *argv]
        enter += ["--mount", "--pid"]
        if cwd is not None:
            enter.append(f"--wdns={cwd}")
        drop = ["setpriv", "--no-new-privs"]
        if self.uid is not None:
            drop += [f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--inh-caps=-all",
                     "--bounding-set=-all"]
        limits = self._rlimits() if self.cgroup is None else []
        prefix = self.cgroup.join_prefix() if self.cgroup else []
        return [*prefix, *enter, "--", *drop, "--", *limits, *argv]

    def network_prefix(self) -> list[str]:
        """The argv prefix that runs a process in the sandbox's network namespace alone, as Loupe's own user with
        Loupe's files: the servers of a browser's sites (the shop, the wiki), which its browser reaches there."""
        return self.command([], network_only=True)

    def host_pid(self, pid: int) -> int | None:
        """The worker's pid of the sandbox's process ``pid`` (as the sandbox's pid namespace numbers it)."""
        if self.pid is None:
            return None
        try:
            namespace = os.readlink(f"/proc/{self.pid}/ns/pid")
        except OSError:
            return None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(entry / "ns" / "pid") != namespace:
                    continue
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("NSpid:") and int(line.split()[-1]) == pid:
                        return int(entry.name)
            except (OSError, ValueError):
                continue
        return None

    def _rlimits(self) -> list[str]:
        """Without a cgroup: per-process limits (processes of the uid, address space, file size)."""
        if shutil.which("prlimit") is None:
            return []
        pids = self.limits.pids if self.uid is not None else self.limits.pids + _threads_of_uid(os.getuid())
        return ["prlimit", f"--nproc={pids}", f"--fsize={self.limits.disk_mb * MB}", "--"]

    def rlimit_memory(self) -> list[str]:
        """An address-space rlimit to add where no cgroup holds memory (not for Chromium, which reserves far more
        address space than it uses)."""
        if self.cgroup is not None or shutil.which("prlimit") is None:
            return []
        return ["prlimit", f"--as={self.limits.memory_mb * MB}", "--"]

    def breach(self) -> str:
        """A limit the sandbox hit since the last call, in words ("" when none, or no cgroup to say it)."""
        return self.cgroup.breach() if self.cgroup is not None else ""

    # sockets in the network namespace
    def listen(self, port: int = 0) -> socket.socket:
        """A TCP socket listening on 127.0.0.1:``port`` (0: a free one) of the sandbox's own loopback."""
        return self._ask(f"listen {port}")

    def connect(self, port: int, timeout_s: float = 5.0) -> socket.socket:
        """A TCP connection to 127.0.0.1:``port`` of the sandbox's loopback; OSError when nothing answers there."""
        return self._ask(f"connect {port} {timeout_s}")

    def _ask(self, request: str) -> socket.socket:
        if self._control is None:
            raise EnvError(f"the sandbox {self.name} makes no sockets (broker=False) or is closed")
        with self._lock:
            self._control.sendall(request.encode() + b"\n")
            message, fds, _, _ = socket.recv_fds(self._control, 1024, 1)
        if not message:
            raise EnvError(f"the sandbox {self.name} ended")
        if not fds:
            raise OSError(message.decode(errors="replace").removeprefix("error "))
        return socket.socket(fileno=fds[0])


def kill_group(process: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """SIGKILL ``process``'s process group (it was started with start_new_session) until none of it is left: a fork
    bomb's copies fork while a pass runs, and its sandbox's process limit keeps them few."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        process.poll()  # reap the leader: a group that holds only it, a zombie, would answer forever
        time.sleep(0.005)


def _visible_dir(path: Path) -> bool:
    """Whether ``path`` shows in the sandbox as it is outside: a folder the read-only root keeps, not one inside a
    private or hidden one (whose contents the sandbox gets new: bwrap makes such a folder, 0700 unless told)."""
    private = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), *hidden_paths()]
    return not any(p in path.parents for p in private)


def _threads_of_uid(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(entry / "task"))
            except OSError:
                continue
    return count
