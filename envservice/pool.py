"""Envs on their own threads, pooled per kind. Django-free: the service (envservice/services.py) leases them.

Playwright's sync objects answer only the thread that made them, and an HTTP server answers each request on a
thread of its own, so every env lives on one thread (an :class:`EnvActor`) that runs the calls sent to it."""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future, TimeoutError as FutureTimeout
from typing import Any, Callable

from agent.envs import EnvError, make_env, tasks_for

log = logging.getLogger(__name__)


class EnvCrashed(Exception):
    """The env failed (its browser died, a call timed out): it is thrown away and a fresh one takes its place."""


class EnvActor:
    """One env, made and used on its own thread."""

    def __init__(self, kind: str, factory: Callable[[str], Any] = make_env) -> None:
        self.kind = kind
        self.env: Any = None
        self.healthy = True
        self.warm = False  # made and reset once: its browser (or process) is up
        self._factory = factory
        self._calls: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name=f"env-{kind}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                break
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                if self.env is None:
                    self.env = self._factory(self.kind)
                future.set_result(fn(self.env))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, who decides
                future.set_exception(exc)
        if self.env is not None:
            try:
                self.env.close()
            except Exception:  # noqa: BLE001 - closing a broken env must not stop the others closing
                log.exception("closing a %s env failed", self.kind)

    def call(self, fn: Callable[[Any], Any], *, timeout: float) -> Any:
        """``fn(env)`` on the env's thread. EnvCrashed when the env fails or does not answer in ``timeout`` s;
        other exceptions (a bad action's ValueError) pass through and leave the env as it was."""
        if not self.healthy:
            raise EnvCrashed(f"this {self.kind} env was already thrown away")
        future: Future = Future()
        self._calls.put((fn, future))
        try:
            return future.result(timeout=timeout)
        except FutureTimeout as exc:
            self.healthy = False
            raise EnvCrashed(f"the {self.kind} env did not answer in {timeout:g} s") from exc
        except EnvError as exc:
            self.healthy = False
            raise EnvCrashed(str(exc)) from exc

    def close(self) -> None:
        self.healthy = False
        self._calls.put(None)


def warm_up(env: Any) -> None:
    """Start what an env starts lazily (a browser, an X server) by resetting it on its kind's first task."""
    name = next(iter(tasks_for(env.kind)))
    env.reset(name, 0)


class Pool:
    """The envs of one kind on this host: ``warm`` of them kept made and idle, at most ``capacity`` at once."""

    def __init__(self, kind: str, *, warm: int = 0, capacity: int = 8, factory: Callable[[str], Any] = make_env,
                 call_timeout: float = 60.0) -> None:
        self.kind, self.warm, self.capacity = kind, warm, capacity
        self.call_timeout = call_timeout
        self._factory = factory
        self._idle: list[EnvActor] = []
        self._leased: set[EnvActor] = set()
        self._lock = threading.Lock()
        self._filling = False
        self._closed = False
        self.crashes = 0

    def status(self) -> dict:
        with self._lock:
            return {"kind": self.kind, "capacity": self.capacity, "leased": len(self._leased),
                    "idle": len(self._idle), "warm_target": self.warm, "crashes": self.crashes}

    def acquire(self) -> tuple[EnvActor, bool]:
        """An env for a lease and whether it was warm. EnvCrashed-free: a full pool raises PoolFull."""
        with self._lock:
            while self._idle:
                actor = self._idle.pop()
                if actor.healthy:
                    self._leased.add(actor)
                    if self.warm:  # the next lease finds one warm too
                        threading.Thread(target=self.fill, name=f"warm-{self.kind}", daemon=True).start()
                    return actor, actor.warm
            if len(self._leased) >= self.capacity:
                raise PoolFull(f"all {self.capacity} {self.kind} envs of this host are leased; release one, or "
                               "try again (or another host)")
            actor = EnvActor(self.kind, self._factory)
            self._leased.add(actor)
        return actor, False

    def give_back(self, actor: EnvActor) -> None:
        with self._lock:
            self._leased.discard(actor)
            if actor.healthy and len(self._idle) < max(self.warm, 1):
                actor.warm = actor.env is not None
                self._idle.append(actor)
                return
        actor.close()

    def discard(self, actor: EnvActor) -> None:
        """Throw an env away (it failed to start, or the service stops)."""
        with self._lock:
            self._leased.discard(actor)
        actor.close()

    def replace(self, actor: EnvActor) -> EnvActor:
        """Throw a crashed env away; a fresh one, leased in its place."""
        with self._lock:
            self._leased.discard(actor)
            self.crashes += 1
            fresh = EnvActor(self.kind, self._factory)
            self._leased.add(fresh)
        actor.close()
        return fresh

    def fill(self) -> None:
        """Make idle envs up to ``warm``, each reset once so its browser is up (on the calling thread's time; one
        filler at a time)."""
        with self._lock:
            if self._filling:
                return
            self._filling = True
        try:
            self._fill()
        finally:
            self._filling = False

    def _fill(self) -> None:
        while True:
            with self._lock:
                if len(self._idle) >= self.warm or len(self._idle) + len(self._leased) >= self.capacity:
                    return
            actor = EnvActor(self.kind, self._factory)
            started = time.monotonic()
            try:
                actor.call(warm_up, timeout=self.call_timeout)
            except Exception:  # noqa: BLE001 - a kind that cannot start here: say so once, keep serving the rest
                log.exception("warming a %s env failed", self.kind)
                actor.close()
                return
            actor.warm = True
            log.info("a warm %s env is ready (%.1f s)", self.kind, time.monotonic() - started)
            with self._lock:
                if not self._closed:
                    self._idle.append(actor)
                    continue
            actor.close()  # the pool closed while this env started
            return

    def close(self) -> None:
        with self._lock:
            self._closed = True
            actors = [*self._idle, *self._leased]
            self._idle.clear()
            self._leased.clear()
        for actor in actors:
            actor.close()


class PoolFull(Exception):
    pass
