"""Warm desktops: displays started and sessions made ahead, so an episode starts without waiting for them.

A ``DesktopPool`` of size N keeps up to N desktops ready (Xvfb up, a fresh session with its own HOME,
its dbus and window manager running) beside the one an episode is using. ``take()`` hands one over at
once; ``give_back(previous)`` returns the previous episode's desktop once the new episode has started, and a
background thread recycles it (kills every process of its session, deletes its HOME, makes a new session)
before it is ready again. A desktop
that died while it waited is dropped and a new one started in its place. Consecutive episodes run on
different desktops, so under root each also runs under a different uid.

One thread does all the starting and recycling: each desktop's X connection is used by one thread at a
time (the pool's while it waits, the env's while an episode runs), and the processes it starts are tied
to a thread that lives as long as the pool (see ``session.Desktop.start``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from agent.envs.base import EnvError
from agent.envs.desktop.session import Desktop
from agent.envs.sandbox import Limits

__all__ = ["DesktopPool"]

log = logging.getLogger(__name__)
_STOP = object()
_NEW = object()


class DesktopPool:
    def __init__(self, size: int, *, width: int = 1280, height: int = 720, per_uid: bool | None = None,
                 take_timeout_s: float = 30.0, limits: Limits | None = None) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"a desktop pool holds at least 1 desktop, got {size!r}")
        self.size, self.width, self.height, self.per_uid = size, width, height, per_uid
        self.limits = limits
        self.take_timeout_s = take_timeout_s
        self._ready: queue.Queue = queue.Queue()
        self._jobs: queue.Queue = queue.Queue()
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="desktop-pool", daemon=True)
        self._thread.start()
        for _ in range(size):
            self._jobs.put(_NEW)

    # -- the episode's side ----------------------------------------------------------------
    def take(self) -> Desktop:
        """A ready desktop (a fresh session, nothing running in it yet); waits while one is being made.
        Call ``give_back`` once the episode has started, so the pool makes up for it."""
        if self._closed:
            raise EnvError("the desktop pool is closed")
        deadline = time.monotonic() + self.take_timeout_s
        while True:
            try:
                item = self._ready.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise EnvError(f"no desktop became ready in {self.take_timeout_s} s") from None
            if isinstance(item, EnvError):
                self._jobs.put(_NEW)  # keep the pool at its size: the next take tries again
                raise item
            try:
                item.check_alive()
            except EnvError as exc:
                log.warning("a warm desktop died while waiting (%s); starting another", exc)
                self._jobs.put(item)  # recycling a dead desktop replaces it
                continue
            return item

    def give_back(self, previous: Desktop | None) -> None:
        """Make up for a ``take``: ``previous``, the desktop the last episode used, is recycled in the background
        (after the new episode has started, so the two do not compete for the CPU); without one (an env's first
        episode, or its desktop died) a new desktop is started."""
        if self._closed:
            if previous is not None:
                previous.close()
            return
        self._jobs.put(previous if previous is not None else _NEW)

    def close_desktop(self, desktop: Desktop) -> None:
        """Close a desktop an episode was using (it died, or the env is closing); the env's next ``take()``
        starts one in its place."""
        desktop.close()

    def ready_count(self) -> int:
        return self._ready.qsize()

    def close(self) -> None:
        """Stop the thread and close every desktop the pool holds (not one an env still uses)."""
        self._closed = True
        self._jobs.put(_STOP)
        self._thread.join(timeout=30)
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, Desktop):
                item.close()

    # -- the pool's thread -----------------------------------------------------------------
    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is _STOP:
                break
            if self._closed:
                if isinstance(job, Desktop):
                    job.close()
                continue
            self._ready.put(self._prepare(job if isinstance(job, Desktop) else None))
        while True:  # desktops given back after close
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if isinstance(job, Desktop):
                job.close()

    @staticmethod
    def _warm_atspi(desktop: Desktop) -> None:
        """Walk the empty desktop once, so the session's accessibility bus is up before the episode's first
        observation needs it (about 80 ms off that walk)."""
        try:
            desktop.accessibility_nodes(timeout_s=5.0)
        except EnvError as exc:  # the episode's own walk will say what is wrong
            log.info("warming AT-SPI on %s failed: %s", desktop.name, exc)

    def _prepare(self, desktop: Desktop | None) -> Desktop | EnvError:
        """A recycled desktop with a new session; a new desktop if there was none or it died."""
        if desktop is not None:
            try:
                desktop.check_alive_display()
                desktop.new_session()
                self._warm_atspi(desktop)
                return desktop
            except Exception as exc:  # noqa: BLE001 - a broken desktop is replaced, not fatal
                log.warning("could not recycle desktop %s (%s); starting a new one", desktop.name, exc)
                desktop.close()
        fresh = Desktop(width=self.width, height=self.height, per_uid=self.per_uid, limits=self.limits)
        try:
            fresh.start()
            fresh.new_session()
            self._warm_atspi(fresh)
            return fresh
        except Exception as exc:  # noqa: BLE001 - handed to take(), which raises it to the episode
            fresh.close()
            return exc if isinstance(exc, EnvError) else EnvError(f"could not start a desktop: {exc}")
