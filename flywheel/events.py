"""The episode event log: stored first (with a per-episode seq), then published on the channel layer."""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import functools
import logging
import os
import threading

from channels.layers import get_channel_layer
from django.db import connection, transaction

from flywheel.models import Event

log = logging.getLogger(__name__)

# Events a process has handed to its publisher and not yet sent. Past this (the channel layer stalled) a new one is
# not queued: it is stored, and watchers fill it in from the log with the next one that arrives.
MAX_QUEUED_PUBLISHES = 1000
PUBLISH_TIMEOUT_S = 10.0
DRAIN_AT_EXIT_S = 5.0


def episode_group(episode_id: int) -> str:
    return f"episode.{episode_id}"


def event_message(event: Event) -> dict:
    return {"type": event.type, "seq": event.seq, "data": event.payload}


def event_append(*, episode_id: int, type: str, payload: dict) -> Event:
    """Append one event; it is published once the surrounding transaction commits."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE flywheel_episode SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq", [episode_id]
            )
            row = cursor.fetchone()
        if row is None:
            raise ValueError(f"episode {episode_id} does not exist")
        event = Event.objects.create(episode_id=episode_id, seq=row[0], type=type, payload=payload)
        transaction.on_commit(lambda: publish(episode_id, event_message(event)))
    return event


class _Publisher:
    """One thread running one event loop for the life of the process, which every broadcast goes through.

    Callers may sit inside an event loop of their own (Playwright's sync API keeps one on the rollout worker's
    thread), where async_to_sync refuses to run. The loop is kept rather than made per send: async_to_sync from a
    plain thread made a new thread and loop for every call, and so a new Redis connection (channels_redis keeps
    its connections per loop). Sends run one at a time, in the order they were asked for, so events go out in
    seq order: ``send`` waits for its own, ``post`` only queues it (the event path: a command's acknowledgement must
    not wait on the Redis round trips of the events it wrote, issue 22)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_order: asyncio.Lock | None = None
        self._queued = 0

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="loupe-publish", daemon=True).start()
                self._loop, self._in_order = loop, asyncio.Lock()
            return self._loop

    async def _send(self, group: str, message: dict, timeout: float | None = None) -> None:
        async with self._in_order:
            sending = get_channel_layer().group_send(group, message)
            await (asyncio.wait_for(sending, timeout) if timeout else sending)

    def send(self, group: str, message: dict, timeout: float) -> None:
        future = asyncio.run_coroutine_threadsafe(self._send(group, message), self._running_loop())
        try:
            future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def post(self, group: str, message: dict, *, what: str, timeout: float = PUBLISH_TIMEOUT_S) -> bool:
        """Queue a send behind the earlier ones and return at once; a failure is logged, naming ``what``. False
        when the queue is full (nothing queued)."""
        loop = self._running_loop()
        with self._lock:
            if self._queued >= MAX_QUEUED_PUBLISHES:
                log.warning("not publishing %s: %d publishes are already waiting on the channel layer; watchers "
                            "will replay it from the log", what, self._queued)
                return False
            self._queued += 1
        future = asyncio.run_coroutine_threadsafe(self._send(group, message, timeout), loop)
        future.add_done_callback(functools.partial(self._posted, what=what))
        return True

    def _posted(self, future: concurrent.futures.Future, *, what: str) -> None:
        with self._lock:
            self._queued -= 1
            if self._queued == 0:
                self._idle.notify_all()
        error = None if future.cancelled() else future.exception()
        if future.cancelled() or error is not None:
            log.warning("could not publish %s; watchers will replay it from the log", what,
                        exc_info=(type(error), error, error.__traceback__) if error else None)

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the queued sends (a process about to exit). True when none is left."""
        with self._lock:
            return self._idle.wait_for(lambda: self._queued == 0, timeout)

    def forget(self) -> None:
        """In a forked child: the parent's thread is not there, so the next send starts a loop of its own."""
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._loop = self._in_order = None
        self._queued = 0


_publisher = _Publisher()
os.register_at_fork(after_in_child=_publisher.forget)
atexit.register(lambda: _publisher.drain(DRAIN_AT_EXIT_S))


def group_send(group: str, message: dict, timeout: float = PUBLISH_TIMEOUT_S) -> None:
    """Send to a channel-layer group from synchronous code, whatever runs on the caller's thread, and wait for it:
    every broadcast from a worker goes through here. Raises what the send raised (TimeoutError past `timeout`)."""
    _publisher.send(group, message, timeout)


def publish(episode_id: int, message: dict) -> None:
    """Best effort, without waiting: a stored event goes out behind the earlier ones, in seq order; a Redis outage
    loses none of them (they are stored), and watchers fill a gap from the log."""
    _publisher.post(episode_group(episode_id), {"type": "episode.event", "message": message},
                    what=f"event {message.get('seq')} of episode {episode_id}")


def publish_drain(timeout: float = DRAIN_AT_EXIT_S) -> bool:
    """Wait for this process's queued publishes (tests, and code that must know they went out)."""
    return _publisher.drain(timeout)


def events_after(*, episode_id: int, after: int, limit: int = 500) -> list[dict]:
    return [
        event_message(e)
        for e in Event.objects.filter(episode_id=episode_id, seq__gt=after).order_by("seq")[:limit]
    ]
