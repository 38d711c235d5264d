"""One Linux desktop: an Xvfb display that lives as long as the env, and a session per episode.

- The display (Xvfb, ``-displayfd`` picks a free number) stays up between episodes; starting it is
  the slow part. Everything else belongs to the *session*: a session dbus, openbox and the apps,
  all run with a fresh HOME. ``new_session`` kills every process of the previous one, deletes its
  HOME and starts over, so nothing of one episode is visible to the next.
- Each session runs in a sandbox of its own (sandbox.py): a network namespace with only a loopback,
  Loupe's files hidden, a private /tmp holding this display's socket alone, a pid namespace, CPU, memory
  and process limits. Its apps, setup and checker commands and the AT-SPI helper all run there. When
  Loupe runs as root, the session also runs under its own unprivileged uid (``61000 + display``);
  ``libnss_wrapper`` gives that uid a passwd entry (dbus refuses a uid without one) without touching
  /etc/passwd. Not root: the session runs as the current user and its processes are found by an
  environment tag they all inherit. Where no sandbox can be made, ``start`` raises SandboxUnavailable.
- The display has an access cookie of its own (``-auth``, MIT-MAGIC-COOKIE-1): the session's programs
  get it in their XAUTHORITY, the env's own connections (input, screenshots) in a file only Loupe's user
  reads; a client without it is refused. The X server itself runs outside the sandbox, in a cgroup of
  its own with the sandbox's memory limit (a client cannot make it take the worker's memory).
- openbox runs with Loupe's configuration (openbox/): its right-click menu opens the apps, and offers no
  way to end the session; the empty desktop says that a right-click opens the menu.

The X protocol work (the cookie, connections, windows, the background) is in x11.py.
"""

from __future__ import annotations

import io
import os
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psutil
from Xlib import X
from Xlib.display import Display

from agent.envs.base import EnvError
from agent.envs.cgroups import Cgroup
from agent.envs.desktop import x11
from agent.envs.desktop.programs import program_available
from agent.envs.desktop.session_files import ATSPI_HELPER, write_session_files
from agent.envs.desktop.x11 import Window, open_display, write_xauthority
from agent.envs.sandbox import Limits, Sandbox, SandboxUnavailable, kill_group, support

__all__ = ["Desktop", "Window", "ATSPI_HELPER", "NSS_WRAPPER", "program_available"]

NSS_WRAPPER = "libnss_wrapper.so"
SYSTEM_PYTHON = "/usr/bin/python3"

UID_BASE = 61000
_TAG = "LOUPE_DESKTOP_SESSION"
HOME_FOLDERS = ("Desktop", "Documents", "Downloads", "Music", "Pictures", "Public", "Templates", "Videos")
BACKGROUND = (46, 74, 98)  # a slate blue: the empty desktop is not a black screen
HINT = "Right-click the desktop to open the applications menu"


class Desktop:
    """An Xvfb display with one session at a time. ``start`` the display, then ``new_session``."""

    def __init__(self, *, width: int = 1280, height: int = 720, per_uid: bool | None = None,
                 start_timeout_s: float = 10.0, limits: Limits | None = None) -> None:
        self.width, self.height = width, height
        self.per_uid = (os.geteuid() == 0) if per_uid is None else per_uid
        if self.per_uid and os.geteuid() != 0:
            raise EnvError("a per-desktop uid needs root (setpriv); run as root or pass per_uid=False")
        self.start_timeout_s = start_timeout_s
        self.limits = limits or Limits.from_env()
        self.number: int | None = None
        self.display: Display | None = None
        self.root_dir: Path | None = None
        self.home: Path | None = None
        self.runtime: Path | None = None  # the session's XDG_RUNTIME_DIR: its cookie, openbox's files, the helper
        self.sandbox: Sandbox | None = None
        self.xauthority: Path | None = None  # the env's own cookie file (Loupe's user only)
        self._cookie = b""
        self._xvfb: subprocess.Popen | None = None
        self._xvfb_cgroup: Cgroup | None = None
        self._session: dict[str, subprocess.Popen] = {}
        self._children: list[subprocess.Popen] = []  # reaped on end_session, so none stays a zombie
        self._token = ""
        self._env: dict[str, str] = {}
        self._mss = None
        self.notes: list[str] = []  # what the session's setup said and went on past (OSWorld's setup ignores it)

    # -- the display -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f":{self.number}"

    @property
    def uid(self) -> int:
        return UID_BASE + (self.number or 0) if self.per_uid else os.getuid()

    def start(self) -> None:
        """Start Xvfb and connect to it; EnvError says why if it does not come up (SandboxUnavailable when no
        session could be confined here: no display is started then)."""
        if shutil.which("Xvfb") is None:
            raise EnvError("Xvfb is not installed (Debian package xvfb); `make env-tools` installs it")
        found = support()
        if not found.namespaces:
            raise SandboxUnavailable(f"desktop tasks need a sandbox, and none can be made here: {found.reason}")
        if self.per_uid and not found.per_uid:
            raise SandboxUnavailable("a per-desktop uid needs root")
        read_fd, write_fd = os.pipe()
        self.root_dir = Path(tempfile.mkdtemp(prefix="loupe-desktop-"))  # 0700: Loupe's user only
        self._cookie = secrets.token_bytes(16)
        write_xauthority(self.root_dir / "xauth-server", self._cookie)
        log = open(self.root_dir / "xvfb.log", "wb")  # noqa: SIM115 - Xvfb keeps writing to it
        # setpriv --pdeathsig: the X server dies with the thread that started it, so a worker killed without
        # closing its env leaves no display behind (its X clients then die with it)
        guard = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        if found.cgroups:
            self._xvfb_cgroup = Cgroup(f"loupe-xvfb-{os.getpid()}-{self.root_dir.name[-8:]}", self.limits)
            try:
                self._xvfb_cgroup.create()
            except OSError as exc:
                self._xvfb_cgroup = None
                log.close()
                raise EnvError(f"the X server's cgroup could not be made: {exc}") from exc
            guard = [*self._xvfb_cgroup.join_prefix(), *guard]
        self._xvfb = subprocess.Popen(
            [*guard, "Xvfb", "-displayfd", str(write_fd), "-screen", "0", f"{self.width}x{self.height}x24",
             "-nolisten", "tcp", "-noreset", "-auth", str(self.root_dir / "xauth-server")],
            pass_fds=(write_fd,), stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        os.close(write_fd)
        log.close()
        number, deadline = b"", time.monotonic() + self.start_timeout_s
        try:  # Xvfb writes the number and then "\n" apart: closing before the newline kills it (EPIPE)
            while not number.endswith(b"\n") and time.monotonic() < deadline:
                ready, _, _ = select.select([read_fd], [], [], max(0.0, deadline - time.monotonic()))
                chunk = os.read(read_fd, 64) if ready else b""
                if not chunk:
                    break
                number += chunk
        finally:
            os.close(read_fd)
        number = number.decode().strip()
        if not number.isdigit():
            self._xvfb.kill()
            raise EnvError(f"Xvfb did not start in {self.start_timeout_s} s: {self._log_tail('xvfb.log')}")
        self.number = int(number)
        self.xauthority = self.root_dir / "xauth"
        write_xauthority(self.xauthority, self._cookie, self.number)
        self.display = self.connect()

    def connect(self) -> Display:
        """A new connection to this display with its cookie (the env's own: input, windows; tests' and benches')."""
        return open_display(self.name, self.xauthority)

    def check_alive(self) -> None:
        """Raise EnvError naming the desktop process that died, if one did."""
        if self._xvfb is None or self.display is None:
            raise EnvError("the desktop is not started")
        if self._xvfb.poll() is not None:
            raise EnvError(f"the desktop's X server (Xvfb {self.name}) exited with code {self._xvfb.returncode}")
        for name, process in self._session.items():
            if process.poll() is not None:
                raise EnvError(f"the desktop's {name} ({self.name}) exited with code {process.returncode}")

    @property
    def xvfb_pid(self) -> int | None:
        return self._xvfb.pid if self._xvfb else None

    # -- the session -----------------------------------------------------------------------
    def new_session(self) -> Path:
        """Kill the previous session, make a fresh HOME and sandbox, start dbus and openbox; return the HOME."""
        self.check_alive_display()
        self.end_session()
        assert self.root_dir is not None and self.display is not None
        self._token = uuid.uuid4().hex
        self.notes = []
        self.home = self.root_dir / f"home-{self._token[:8]}"
        runtime = self.runtime = self.root_dir / f"run-{self._token[:8]}"
        uid = self.uid if self.per_uid else None
        for folder in (self.home, runtime):
            folder.mkdir(mode=0o700)
            if uid is not None:
                os.chown(folder, uid, uid)
        user = f"loupe{self.number}"
        write_xauthority(runtime / "Xauthority", self._cookie, self.number, uid)
        write_session_files(runtime, user=user, uid=self.uid if self.per_uid else None, home=self.home)
        self._env = {
            "PATH": f"{runtime / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home), "USER": user, "LOGNAME": user,
            "SHELL": "/bin/bash", "DISPLAY": self.name, "LANG": "C.UTF-8", "TERM": "xterm",
            "XDG_RUNTIME_DIR": str(runtime), "XAUTHORITY": str(runtime / "Xauthority"), "GDK_BACKEND": "x11",
            "TMPDIR": "/tmp", _TAG: self._token,
        }
        if self.per_uid:
            self._env.update(LD_PRELOAD=NSS_WRAPPER, NSS_WRAPPER_PASSWD=str(runtime / "passwd"),
                             NSS_WRAPPER_GROUP=str(runtime / "group"))
        socket_path = Path(f"/tmp/.X11-unix/X{self.number}")
        sandbox = Sandbox(f"loupe-desktop-{os.getpid()}-{self.number}-{self._token[:8]}", binds=[self.home, runtime],
                          ro_binds=[socket_path] if socket_path.exists() else [], uid=uid, limits=self.limits)
        sandbox.start()
        self.sandbox = sandbox
        for name in HOME_FOLDERS:  # the home as OSWorld's Ubuntu user has it (in the sandbox's own disk, now mounted)
            (self.home / name).mkdir()
            if uid is not None:
                os.chown(self.home / name, uid, uid)
        dbus = self.popen(["dbus-daemon", "--session", "--nofork", "--nopidfile", "--print-address=1"],
                          stdout=subprocess.PIPE)
        ready, _, _ = select.select([dbus.stdout], [], [], self.start_timeout_s)
        address = dbus.stdout.readline().decode().strip() if ready else ""
        if not address:
            dbus.kill()
            raise EnvError(f"the session dbus did not start on {self.name} (exit code {dbus.poll()})")
        self._env["DBUS_SESSION_BUS_ADDRESS"] = address
        self._session["session dbus"] = dbus
        root = self.display.screen().root
        check = self.display.intern_atom("_NET_SUPPORTING_WM_CHECK")
        root.delete_property(check)
        # at-spi-bus-launcher publishes its bus here; a stale one would send the AT-SPI walk to
        # the previous session's (dead) bus instead of activating this session's launcher.
        root.delete_property(self.display.intern_atom("AT_SPI_BUS"))
        self._paint_background()
        self.display.sync()
        self._session["window manager (openbox)"] = self.popen(
            ["openbox", "--sm-disable", "--config-file", str(runtime / "openbox-rc.xml")], log="openbox.log")
        deadline = time.monotonic() + self.start_timeout_s
        while root.get_full_property(check, X.AnyPropertyType) is None:
            self.check_alive()
            if time.monotonic() > deadline:
                raise EnvError(f"openbox did not take {self.name} in {self.start_timeout_s} s")
            time.sleep(0.02)
        return self.home

    def _paint_background(self) -> None:
        """A slate-blue desktop with the hint that a right-click opens the apps (drawn into the root window's
        background, so it shows wherever no window is)."""
        assert self.display is not None
        x11.paint_background(self.display, self.width, self.height, BACKGROUND, HINT)
    def check_alive_display(self) -> None:
        if self._xvfb is None or self.display is None:
            raise EnvError("the desktop is not started")
        if self._xvfb.poll() is not None:
            raise EnvError(f"the desktop's X server (Xvfb {self.name}) exited with code {self._xvfb.returncode}")

    def session_processes(self) -> list[psutil.Process]:
        """Every live process of the current session (the uid's, or those carrying the session tag).

        Zombies do not count: an orphan whose parent died is reparented to PID 1, which in a
        container may never reap it; it holds a pid entry, nothing else.

        Per uid, a process tagged with another session's token is not ours: the uid comes from the display number,
        and when a desktop's X server dies (killed, or its worker was), the number is free for another desktop,
        perhaps in another process, before the dead one's session is ended; ending it then killed the new desktop's
        openbox (CI, stop 28's rerun). Untagged processes of the uid are still ours to kill."""
        found = []
        for process in psutil.process_iter(["uids", "status"]):
            try:
                if process.info["status"] == psutil.STATUS_ZOMBIE:
                    continue
                if self.per_uid:
                    if process.info["uids"] and process.info["uids"].real == self.uid:
                        tag = process.environ().get(_TAG)
                        if tag is None or tag == self._token:
                            found.append(process)
                elif self._token and process.pid != os.getpid() and process.environ().get(_TAG) == self._token:
                    found.append(process)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def end_session(self) -> None:
        """Kill every session process (its sandbox first: all of its pid namespace dies with it) and delete the
        session's HOME."""
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        deadline = time.monotonic() + 3.0
        while True:
            processes = self.session_processes()
            if not processes:
                break
            if time.monotonic() > deadline:
                raise EnvError(f"{len(processes)} processes of the session on {self.name} survived SIGKILL")
            for process in processes:
                try:
                    process.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
            for child in self._children:
                if child.poll() is None:
                    try:
                        child.wait(timeout=0.5)
                    except subprocess.TimeoutExpired:
                        pass
            time.sleep(0.01)
        for child in self._children:
            child.poll()
        self._children = [child for child in self._children if child.returncode is None]
        self._session.clear()
        if self.root_dir is not None:
            for folder in [*self.root_dir.glob("home-*"), *self.root_dir.glob("run-*")]:
                shutil.rmtree(folder, ignore_errors=True)
        self.home = self.runtime = None

    def _command(self, argv: list[str] | str, shell: bool) -> list[str]:
        """``argv`` as the session runs it: in its sandbox (and uid), in its HOME."""
        if self.home is None or self.sandbox is None:
            raise EnvError("no session: call new_session() first")
        command = ["bash", "-c", argv] if shell and isinstance(argv, str) else (
            shlex.split(argv) if isinstance(argv, str) else list(argv))
        return self.sandbox.command([*self.sandbox.rlimit_memory(), *command], cwd=self.home)

    def popen(self, argv: list[str] | str, *, shell: bool = False, stdout: int | None = None,
              log: str | None = None) -> subprocess.Popen:
        """Start a process in the session (its sandbox, uid, HOME, display and bus); stderr to ``log``."""
        command = self._command(argv, shell)
        assert self.root_dir is not None
        err = open(self.root_dir / (log or "session.log"), "ab")  # noqa: SIM115 - handed to the child
        try:
            child = subprocess.Popen(command, env=self._env, stdin=subprocess.DEVNULL,
                                     stdout=stdout if stdout is not None else err, stderr=err,
                                     start_new_session=True)
            self._children.append(child)
            return child
        except OSError as exc:
            raise EnvError(f"could not start {command[-1] if shell else argv!r}: {exc}") from exc
        finally:
            err.close()

    def run(self, argv: list[str] | str, *, shell: bool = False, timeout_s: float = 30.0,
            ) -> subprocess.CompletedProcess:
        """Run a command in the session to its end; stdout and stderr as text (the first MBs of each). EnvError when it
        runs over its time; ``breach()`` says afterwards whether it hit one of the sandbox's limits. A process it left
        running in the background (``cmd &``) goes on, and its output is not waited for."""
        command = self._command(argv, shell)
        process = subprocess.Popen(command, env=self._env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        streams = [_Pump(process.stdout), _Pump(process.stderr)]
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(process)  # the whole group: its children, a fork bomb's copies
            process.wait()
            breach = self.breach()
            raise EnvError(f"{argv!r} ran over {timeout_s} s and was stopped{f'; {breach}' if breach else ''}"
                           ) from None
        out, err = (stream.text(wait_s=0.5) for stream in streams)
        return subprocess.CompletedProcess(command, process.returncode, out, err)

    def breach(self) -> str:
        """A limit the session's sandbox hit since the last call, in words ("" when none)."""
        return self.sandbox.breach() if self.sandbox is not None else ""

    def log_tail(self, name: str = "session.log", chars: int = 400) -> str:
        return self._log_tail(name, chars)

    def _log_tail(self, name: str, chars: int = 400) -> str:
        try:
            return (self.root_dir / name).read_text(errors="replace")[-chars:].strip() if self.root_dir else ""
        except OSError:
            return ""

    # -- windows ---------------------------------------------------------------------------
    def windows(self) -> list[Window]:
        """Top-level client windows, in the window manager's order (oldest first)."""
        assert self.display is not None
        return x11.windows(self.display)

    def activate(self, window: Window) -> None:
        """Raise and focus a window through the window manager (_NET_ACTIVE_WINDOW)."""
        assert self.display is not None
        x11.activate(self.display, window)

    def close_window(self, window: Window) -> None:
        """Ask a window to close through the window manager (_NET_CLOSE_WINDOW), as a click on its close button."""
        assert self.display is not None
        x11.close_window(self.display, window)

    def type_keys(self, keys: list[tuple[str, str]]) -> None:
        """Press ``("hotkey", "ctrl+shift+p")`` and type ``("type", "text")`` in order, on the focused window, from
        inside the session (xdotool), as a getter that drives an app does."""
        for kind, value in keys:
            argv = ["xdotool", "key", "--clearmodifiers", value] if kind == "hotkey" else \
                ["xdotool", "type", "--delay", "20", value]
            self.run(argv, timeout_s=15)
            time.sleep(0.2)

    def has_focus(self, window: Window) -> bool:
        """Whether the keyboard focus is on ``window`` or inside it (xterm focuses a child window)."""
        assert self.display is not None
        return x11.has_focus(self.display, window)

    # -- what is on the screen -------------------------------------------------------------
    def screenshot(self, quality: int = 80) -> bytes:
        """The whole screen as JPEG bytes (mss grabs through XGetImage / XShm)."""
        return self.jpeg(*self.grab(), quality)

    def grab(self) -> tuple[bytes, tuple[int, int]]:
        """The whole screen's RGB pixels and its size."""
        import mss

        if self._mss is None:
            with x11.using_xauthority(self.xauthority):
                self._mss = mss.mss(display=self.name)
        shot = self._mss.grab(self._mss.monitors[0])
        return shot.rgb, shot.size

    @staticmethod
    def jpeg(rgb: bytes, size: tuple[int, int], quality: int) -> bytes:
        from PIL import Image

        buffer = io.BytesIO()
        Image.frombytes("RGB", size, rgb).save(buffer, format="JPEG", quality=quality)
        return buffer.getvalue()

    def accessibility_nodes(self, *, max_depth: int = 24, max_children: int = 60, max_nodes: int = 1500,
                            timeout_s: float = 10.0) -> dict:
        """The capped AT-SPI walk (see atspi_helper.py), run under the session's uid."""
        import json

        if not Path(SYSTEM_PYTHON).exists():
            raise EnvError(f"{SYSTEM_PYTHON} is missing; AT-SPI needs Debian's python3 with python3-pyatspi")
        if self.runtime is None:
            raise EnvError("no session: call new_session() first")
        result = self.run([SYSTEM_PYTHON, str(self.runtime / "atspi_helper.py"), f"--max-depth={max_depth}",
                           f"--max-children={max_children}", f"--max-nodes={max_nodes}"], timeout_s=timeout_s)
        if result.returncode != 0:
            raise EnvError(f"the AT-SPI walk failed (exit {result.returncode}): {result.stderr.strip()[-300:]}")
        return json.loads(result.stdout)

    def memory_bytes(self) -> int:
        """Resident memory of the X server and every session process (unique set size where known)."""
        processes = self.session_processes()
        if self._xvfb is not None and self._xvfb.poll() is None:
            processes.append(psutil.Process(self._xvfb.pid))
        total = 0
        for process in processes:
            try:
                info = process.memory_full_info()
                total += getattr(info, "uss", info.rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return total

    def close(self) -> None:
        """End the session and the display, and delete the desktop's files."""
        try:
            self.end_session()
        finally:
            if self._mss is not None:
                try:
                    self._mss.close()
                except Exception:  # the display may already be gone
                    pass
                self._mss = None
            if self.display is not None:
                try:
                    self.display.close()
                except Exception:
                    pass
                self.display = None
            if self._xvfb is not None:
                if self._xvfb.poll() is None:
                    self._xvfb.kill()
                self._xvfb.wait()
                self._xvfb = None
            if self._xvfb_cgroup is not None:
                self._xvfb_cgroup.remove()
                self._xvfb_cgroup = None
            if self.root_dir is not None:
                shutil.rmtree(self.root_dir, ignore_errors=True)
                self.root_dir = None


class _Pump:
    """Reads a child's output pipe in a thread, so that a process the child left in the background holding the
    pipe does not keep the caller waiting once the child itself has exited."""

    LIMIT = 4 * 2**20

    def __init__(self, stream) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        with stream:
            for block in iter(lambda: stream.read1(65536), b""):
                if self._size < self.LIMIT:
                    self._chunks.append(block)
                    self._size += len(block)

    def text(self, wait_s: float) -> str:
        self._thread.join(wait_s)
        return b"".join(list(self._chunks)).decode("utf-8", "replace")


