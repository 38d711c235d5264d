"""A lease's pieces, apart from the service that hands leases out (services.py): the lease itself, the writer that
stores its records off the env's thread, and the live view's window on its env."""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from agent.envs import Observation
from core.errors import ApplicationError
from envservice.pool import EnvActor, EnvCrashed
from rollouts.models import Episode
from projects.models import TaskSpec

log = logging.getLogger(__name__)


class Writer:
    """A lease's database writes, in order, on a thread of their own: a step's answer goes back while its Step is
    stored (the env does not wait on PostgreSQL). ``flush`` waits for every write so far; the lease flushes before
    an episode starts or ends and before it answers an error, so what a caller is told is stored is stored."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="envservice-writer")
        self._error: BaseException | None = None

    def submit(self, fn, /, **kwargs) -> None:
        def run():
            try:
                fn(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - kept for flush, which tells the caller
                log.exception("storing a step of an envservice episode failed")
                self._error = self._error or exc
        self._pool.submit(run)

    def flush(self) -> None:
        self._pool.submit(lambda: None).result()
        if self._error is not None:
            error, self._error = self._error, None
            raise ApplicationError(f"Storing the episode's steps failed: {error}. The lease goes on; its episode "
                                   "lacks those steps.", status=500)

    def close(self) -> None:
        self._pool.submit(lambda: connection.close())  # the writer thread's own (connection.close is the caller's)
        self._pool.shutdown(wait=True)


@dataclass
class Lease:
    id: str
    user: Any
    task: TaskSpec
    seed: int
    actor: EnvActor
    action_format: str
    run: str = ""  # the RL run playing through this lease: its episodes carry it (Episode.rl_run)
    episode: Episode | None = None
    episode_id: int | None = None
    writer: Writer = field(default_factory=Writer)
    index: int = 0
    done: bool = True
    observation: Observation | None = None
    ended: str = ""  # why the lease ended, once it has (a call that waited on its lock then gets 410)
    supervisor: Any = None  # the live episode's (people's commands decide its steps); None once it ends
    quiet_until: float = 0.0  # till then, no command announced means the step needs no review
    rejected: dict[int, int] = field(default_factory=dict)  # step index -> the caller's actions people rejected there
    last_seen: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ActorScreen:
    """The live view's window on a leased env: its frames are read on the env's own thread (Playwright answers only
    the thread that made it), while the step waiting for a person runs on the request's."""

    def __init__(self, actor: EnvActor) -> None:
        self._actor = actor
        self._streaming = False  # stopping a stream that never started costs every step a trip to the env's thread

    def live_frame(self):
        self._streaming = True
        try:
            return self._actor.call(lambda env: env.live_frame(), timeout=5.0)
        except EnvCrashed:
            return None

    def live_stop(self) -> None:
        if self._streaming and self._actor.healthy:
            self._streaming = False
            try:
                self._actor.call(lambda env: env.live_stop(), timeout=5.0)
            except EnvCrashed:
                pass


def lease_check_live(lease: Lease) -> None:
    """A call on a lease that has ended is answered 410, with why it ended."""
    if lease.ended:
        raise ApplicationError(f"This lease ended: {lease.ended}. Lease an env again.", status=410)
