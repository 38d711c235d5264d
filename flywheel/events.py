"""The episode event log: stored first (with a per-episode seq), then published on the channel layer."""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction

from flywheel.models import Event

log = logging.getLogger(__name__)


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


# One publishing thread: callers may sit inside an event loop of their own (Playwright's sync API
# keeps one on the rollout worker's thread), where async_to_sync refuses to run; one thread also
# keeps publishes in seq order.
_publisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loupe-publish")


def _group_send(group: str, message: dict) -> None:
    async_to_sync(get_channel_layer().group_send)(group, message)


def group_send(group: str, message: dict, timeout: float = 10) -> None:
    """Send to a channel-layer group from synchronous code, whatever runs on the caller's thread: every
    broadcast from a worker goes through here (a worker process that ran a rollout keeps Playwright's
    event loop on its thread, and async_to_sync there raises). Raises what the send raised."""
    _publisher.submit(_group_send, group, message).result(timeout=timeout)


def publish(episode_id: int, message: dict) -> None:
    """Best effort: a Redis outage loses no event (it is stored); watchers fill the gap from the log."""
    try:
        group_send(episode_group(episode_id), {"type": "episode.event", "message": message})
    except Exception:  # the event is stored; say so and carry on
        log.warning("could not publish event %s of episode %s; watchers will replay it", message.get("seq"),
                    episode_id, exc_info=True)


def events_after(*, episode_id: int, after: int, limit: int = 500) -> list[dict]:
    return [
        event_message(e)
        for e in Event.objects.filter(episode_id=episode_id, seq__gt=after).order_by("seq")[:limit]
    ]
