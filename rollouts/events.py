"""The episode event log: stored first (with a per-episode seq), then published on the channel layer."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
from collections.abc import Iterator

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from rollouts.models import Event

log = logging.getLogger(__name__)


def episode_group(episode_id: int) -> str:
    return f"episode.{episode_id}"


def event_message(event: Event) -> dict:
    return {"type": event.type, "seq": event.seq, "data": event.payload}


def event_append(*, episode_id: int, type: str, payload: dict) -> Event:
    """Append one event; it is published once the surrounding transaction commits (at once outside one).

    One statement takes the episode's next seq and stores the event, so it is atomic by itself: no savepoint and
    no second round trip (event_append runs inside every command that changes who steers, and for every step a
    rollout worker stores). An episode that does not exist stores nothing and raises ValueError."""
    field = Event._meta.get_field("payload")
    created_at = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_APPEND_SQL, [episode_id, type, field.get_db_prep_save(payload, connection), created_at])
        row = cursor.fetchone()
    if row is None:
        raise ValueError(f"episode {episode_id} does not exist")
    event = Event(id=row[0], episode_id=episode_id, seq=row[1], type=type, payload=payload, created_at=created_at)
    transaction.on_commit(lambda: publish(episode_id, event_message(event)))
    return event


_APPEND_SQL = (
    "WITH next AS (UPDATE flywheel_episode SET last_seq = last_seq + 1 WHERE id = %s RETURNING id, last_seq) "
    "INSERT INTO flywheel_event (episode_id, seq, type, payload, created_at) "
    "SELECT next.id, next.last_seq, %s, %s, %s FROM next RETURNING id, seq")


class _Publisher:
    """One thread running one event loop for the life of the process, which every broadcast goes through.

    Callers may sit inside an event loop of their own (Playwright's sync API keeps one on the rollout worker's
    thread), where async_to_sync refuses to run. The loop is kept rather than made per send: async_to_sync from a
    plain thread made a new thread and loop for every call, and so a new Redis connection (channels_redis keeps
    its connections per loop). Sends run one at a time, in the order they were asked for, so events go out in
    seq order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_order: asyncio.Lock | None = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="loupe-publish", daemon=True).start()
                self._loop, self._in_order = loop, asyncio.Lock()
            return self._loop

    async def _send(self, group: str, message: dict) -> None:
        async with self._in_order:
            await get_channel_layer().group_send(group, message)

    def send(self, group: str, message: dict, timeout: float) -> None:
        future = asyncio.run_coroutine_threadsafe(self._send(group, message), self._running_loop())
        try:
            future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def forget(self) -> None:
        """In a forked child: the parent's thread is not there, so the next send starts a loop of its own."""
        self._lock = threading.Lock()
        self._loop = self._in_order = None


_publisher = _Publisher()
os.register_at_fork(after_in_child=_publisher.forget)


def group_send(group: str, message: dict, timeout: float = 10) -> None:
    """Send to a channel-layer group from synchronous code, whatever runs on the caller's thread: every
    broadcast from a worker goes through here. Raises what the send raised (TimeoutError past `timeout`)."""
    _publisher.send(group, message, timeout)


_collecting = threading.local()


@contextlib.contextmanager
def publishes_collected(collected: list) -> Iterator[None]:
    """Within it, this thread's publishes are not sent but appended to ``collected`` as (group, message), in order,
    for the caller to send (annotation/live_db.py hands a live socket's to daphne's own event loop, after the
    socket's answer)."""
    outer = getattr(_collecting, "into", None)
    _collecting.into = collected
    try:
        yield
    finally:
        _collecting.into = outer


def publish(episode_id: int, message: dict) -> None:
    """Best effort: a Redis outage loses no event (it is stored); watchers fill the gap from the log."""
    group, envelope = episode_group(episode_id), {"type": "episode.event", "message": message}
    into = getattr(_collecting, "into", None)
    if into is not None:
        into.append((group, envelope))
        return
    try:
        group_send(group, envelope)
    except Exception:  # the event is stored; say so and carry on
        log.warning("could not publish event %s of episode %s; watchers will replay it", message.get("seq"),
                    episode_id, exc_info=True)


async def publish_collected(collected: list[tuple[str, dict]]) -> None:
    """Send what publishes_collected gathered, in order, from the running event loop; best effort, as publish."""
    for group, envelope in collected:
        try:
            await get_channel_layer().group_send(group, envelope)
        except Exception:  # the event is stored; watchers fill the gap from the log
            log.warning("could not publish event %s to %s; watchers will replay it", envelope["message"].get("seq"),
                        group, exc_info=True)


def events_after(*, episode_id: int, after: int, limit: int = 500) -> list[dict]:
    return [
        event_message(e)
        for e in Event.objects.filter(episode_id=episode_id, seq__gt=after).order_by("seq")[:limit]
    ]
