"""The live sockets' database calls, on threads of their own instead of the one Django serialises them on.

Channels' database_sync_to_async is thread-sensitive: every ORM call of a daphne process runs on one thread, so
with 100 sockets open a command waits behind every other socket's commands and catch-ups, and with
LOUPE_DB_CONN_MAX_AGE=0 each call also opened a new PostgreSQL connection (README, Sizing: the live sockets).
`live_db(fn, **kwargs)` runs a call on a pool of
LOUPE_LIVE_DB_THREADS threads, each keeping its connection between calls: one daphne holds at most that many
connections for its sockets, however many sockets it carries, and calls of different sockets run side by side.

Calls of one socket stay in order: a consumer awaits each call before it handles its next frame. A thread's
connection is closed before its next call when a call left it broken (a database outage), outside autocommit,
or older than LIVE_CONNECTION_MAX_AGE seconds (what close_old_connections does around a request), and when it sat
idle past LIVE_IDLE_CHECK_SECONDS and no longer answers (the server restarted or dropped it meanwhile: with
connections opened per call, as before, that never cost a command, and it still must not).
"""
from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Callable, TypeVar

from django.conf import settings
from django.db import DatabaseError, connection

from rollouts.events import publish_collected, publishes_collected

T = TypeVar("T")
log = logging.getLogger(__name__)

LIVE_CONNECTION_MAX_AGE = 300.0  # seconds: a connection is renewed now and then (server-side settings, memory)
LIVE_IDLE_CHECK_SECONDS = 1.0  # a connection idle longer is checked (one round trip) before a call uses it

_opened = threading.local()  # this thread's connection object, when it was first seen open, when last used
_deferring = threading.local()  # `into`: where this thread's after_reply calls go while a live call runs
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            threads = settings.LOUPE_LIVE_DB_THREADS
            if threads < 1:
                raise ValueError(f"LOUPE_LIVE_DB_THREADS must be at least 1, not {threads}.")
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="loupe-live-db")
        return _pool


def _forget_pool_in_child() -> None:
    """A forked child has none of its parent's threads: a pool copied from the parent would queue calls forever."""
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_in_child)


def _connection_refresh() -> None:
    """Close this thread's connection if the next call must not use it; the call then opens a new one."""
    if connection.connection is None:
        return
    now = time.monotonic()
    if connection.connection is not getattr(_opened, "connection", None):
        _opened.connection, _opened.at, _opened.used_at = connection.connection, now, now
    stale = now - _opened.at > LIVE_CONNECTION_MAX_AGE
    if connection.errors_occurred or now - _opened.used_at > LIVE_IDLE_CHECK_SECONDS:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            stale = True
    if stale or not connection.get_autocommit():
        with suppress(DatabaseError):  # a connection the server already dropped may fail to close: it is gone anyway
            connection.close()


def after_reply(fn: Callable[[], object]) -> None:
    """Run `fn()` once the live socket whose call asked for it has its answer (on the live pool, errors logged); at
    once outside a live call. For work the answer does not depend on: the rollout worker's wake-up after a command
    is committed costs a round trip to PostgreSQL that the ack need not wait for."""
    into = getattr(_deferring, "into", None)
    if into is None:
        fn()
    else:
        into.append(fn)


def _run_deferred(*, calls: list[Callable[[], object]]) -> None:
    for fn in calls:
        try:
            fn()
        except Exception:  # the answer is sent; what was deferred is best effort by its nature (after_reply)
            log.exception("a call deferred until after a live socket's answer failed")


def _call(fn: Callable[..., T], kwargs: dict, collected: list | None, deferred: list | None = None) -> T:
    _connection_refresh()
    outer, _deferring.into = getattr(_deferring, "into", None), deferred
    try:
        with publishes_collected(collected):
            return fn(**kwargs)
    finally:
        _deferring.into = outer
        now = time.monotonic()
        if connection.connection is not None and connection.connection is not getattr(_opened, "connection", None):
            _opened.connection, _opened.at = connection.connection, now
        _opened.used_at = now


_sending: set[asyncio.Task] = set()  # the loop keeps only weak references to its tasks


async def live_db(fn: Callable[..., T], /, **kwargs) -> T:
    """Run `fn(**kwargs)` (ORM code) on the live pool and return what it returns, or raise what it raised.

    The events the call stored are published afterwards, from this loop, in a task of their own: the call's
    thread does not wait on Redis, and the socket answers (an ack) without waiting for the broadcast (waiting
    there, every publish of the process queued behind one publisher thread). Work the call deferred with
    `after_reply` is handed to the pool once the answer is sent. A broadcast that comes late or never is what the
    consumers already handle: a gap is filled from the stored log, a repeat is dropped by its seq."""
    loop = asyncio.get_running_loop()
    collected: list = []  # also what a call that failed had already committed
    deferred: list = []  # after_reply calls: submitted once the caller has sent its answer (call_soon runs after it)
    try:
        return await loop.run_in_executor(_executor(), functools.partial(_call, fn, kwargs, collected, deferred))
    finally:
        if collected:
            task = loop.create_task(publish_collected(collected))
            _sending.add(task)
            task.add_done_callback(_sending.discard)
        if deferred:
            loop.call_soon(_executor().submit, _call, _run_deferred, {"calls": deferred}, None)
