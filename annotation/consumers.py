"""The live-session WebSocket: /ws/episodes/<id>/?after=<seq>.

On connect: authenticate (4401), check origin and project membership (4403), replay every stored
event after `seq`, then stream. Every server message carries `type` and the episode's increasing
`seq`; a gap in the live stream is filled from the stored log, and so is a broadcast that never came (LogSweep),
so a client sees no gap and no duplicate. Client commands are stored before they are acknowledged
(annotation/services.py). Database calls (the role, the replay, commands) run on the live pool
(annotation/live_db.py), not on Django's one thread.
Per-connection messages carry no seq: `hello` (server clock), `ack`, `error` about the client's own
frame, `presence` (who is watching), `transcript.interim` (provisional words, replaced by stored ones) and
`live.frame` (the env's screen while the worker waits for a person: annotation/live_view.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from urllib.parse import parse_qs

import redis.asyncio as aioredis
from autobahn.exception import Disconnected
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from redis import exceptions as redis_exceptions

from annotation.live_db import live_db
from annotation.live_view import presence_key
from annotation.services import command_submit
from rollouts.events import episode_group, events_after
from rollouts.models import Episode
from projects.selectors import project_role

log = logging.getLogger(__name__)

CLOSE_NOT_AUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
# RFC 6455's 1009 ("message too big") cannot be sent by a daphne application: autobahn only lets a
# server close with 1000 or 3000-4999. 4009 is its application-range twin.
CLOSE_TOO_BIG = 4009
# 429's twin: the client sent frames faster than LOUPE_WS_MAX_FRAMES_PER_SECOND (after a burst of LOUPE_WS_FRAME_BURST).
CLOSE_RATE_LIMITED = 4029


class FrameBucket:
    """A token bucket: `burst` frames at once, refilled at `rate` a second. One a connection, so a client
    that floods is closed without slowing anyone else's socket."""

    def __init__(self, *, rate: float, burst: int, clock=time.monotonic):
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens, self.at = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


_presence_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _presence_client() -> aioredis.Redis:
    """The running loop's Redis client for presence, kept: a client made per join and leave cost a new connection
    (and redis-py's reading of its own package metadata) each time, most of a disconnect's CPU (README, Sizing: the
    live sockets)."""
    loop = asyncio.get_running_loop()
    client = _presence_clients.get(loop)
    if client is None:
        client = _presence_clients[loop] = aioredis.from_url(
            settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=5,
            retry_on_error=[redis_exceptions.ConnectionError, redis_exceptions.TimeoutError])
    return client


def _stored_last_seqs(*, episode_ids: list[int]) -> dict[int, int]:
    return dict(Episode.objects.filter(pk__in=episode_ids).values_list("pk", "last_seq"))


class LogSweep:
    """One a daphne event loop: every LOUPE_WS_RESYNC_SECONDS, one query reads the stored last seq of every episode
    this loop's sockets watch. A socket that is short of a seq already stored at the sweep before, and was sent
    nothing since, is sent the rest from the log: one query an episode, however many of its sockets are stalled.

    A consumer otherwise learns of a missed broadcast only from the next one (a gap in seq). The pub/sub channel
    layer keeps nothing for a subscriber that is away, so the broadcasts of a Redis restart are lost, and the last
    one before a pause (a proposal waiting for its approval) has no next one: without the sweep the person would
    wait for it forever. A broadcast in flight is not fetched as well: it has a whole sweep to arrive, and a socket
    that was sent anything in that sweep is not stalled. A daphne too busy to keep up (its sockets late, but
    moving) must not also answer a query for every socket: that load made it later still."""

    _of_loop: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @classmethod
    def of_running_loop(cls) -> LogSweep:
        loop = asyncio.get_running_loop()
        sweep = cls._of_loop.get(loop)
        if sweep is None:
            sweep = cls._of_loop[loop] = cls()
        return sweep

    def __init__(self) -> None:
        self.watching: dict[int, set[EpisodeConsumer]] = {}
        self.task: asyncio.Task | None = None
        self.catching_up: dict[int, asyncio.Task] = {}  # episode id -> its catch-up from the log, while it runs

    def add(self, consumer: EpisodeConsumer) -> None:
        self.watching.setdefault(consumer.episode_id, set()).add(consumer)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def discard(self, consumer: EpisodeConsumer) -> None:
        consumers = self.watching.get(consumer.episode_id)
        if consumers is not None:
            consumers.discard(consumer)
            if not consumers:
                del self.watching[consumer.episode_id]

    async def _run(self) -> None:
        while self.watching:
            await asyncio.sleep(settings.LOUPE_WS_RESYNC_SECONDS)
            if not self.watching:
                break
            try:
                stored = await live_db(_stored_last_seqs, episode_ids=list(self.watching))
            except Exception:  # the database is away: the next sweep tries again
                log.warning("could not read the episodes' stored seqs for the sockets' sweep", exc_info=True)
                continue
            for episode_id, consumers in list(self.watching.items()):
                stalled = [consumer for consumer in list(consumers) if consumer.swept(stored.get(episode_id, 0))]
                running = self.catching_up.get(episode_id)
                if stalled and (running is None or running.done()):
                    self.catching_up[episode_id] = asyncio.get_running_loop().create_task(
                        self._catch_up(episode_id, stalled))

    async def _catch_up(self, episode_id: int, consumers: list[EpisodeConsumer]) -> None:
        after = first = min(consumer.last_seq for consumer in consumers)
        try:
            while True:
                batch = await live_db(events_after, episode_id=episode_id, after=after)
                for consumer in consumers:
                    await consumer.send_missed(batch)
                if batch:
                    after = batch[-1]["seq"]
                if len(batch) < 500:
                    break
            if after > first:
                log.info("%s socket(s) of episode %s were sent seq %s-%s from the log: their broadcasts did not come",
                         len(consumers), episode_id, first + 1, after)
        except Exception:  # the next sweep tries again
            log.warning("could not catch sockets of episode %s up from the log", episode_id, exc_info=True)


def _episode_role(*, user, episode_id: int) -> tuple[int | None, str | None]:
    project_id = Episode.objects.filter(pk=episode_id).values_list("project_id", flat=True).first()
    if project_id is None:
        return None, None
    return project_id, project_role(user=user, project=project_id)


class EpisodeConsumer(AsyncWebsocketConsumer):
    episode_id: int
    last_seq: int = 0
    role: str | None = None
    stored_at_last_sweep: int | None = None  # the episode's stored last seq when the sweep last looked
    sent_at_last_sweep: int | None = None  # and this socket's last_seq then

    async def connect(self):
        self.bucket = FrameBucket(rate=settings.LOUPE_WS_MAX_FRAMES_PER_SECOND, burst=settings.LOUPE_WS_FRAME_BURST)
        self.closing = False
        self.log_lock = asyncio.Lock()  # a sweep's catch-up and a live event are sent one at a time, in seq order
        await self.accept()
        user = self.scope.get("user")
        auth = self.scope.get("auth", {})
        if not user or not user.is_authenticated:
            return await self.close(code=CLOSE_NOT_AUTHENTICATED)
        if not auth.get("origin_ok"):
            return await self.close(code=CLOSE_FORBIDDEN)
        self.episode_id = int(self.scope["url_route"]["kwargs"]["episode_id"])
        project_id, self.role = await live_db(_episode_role, user=user, episode_id=self.episode_id)
        if self.role is None:  # also for a missing episode: existence is not revealed
            return await self.close(code=CLOSE_FORBIDDEN)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        try:
            self.last_seq = max(0, int(query.get("after", ["0"])[0]))
        except ValueError:
            self.last_seq = 0
        self.group = episode_group(self.episode_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        # hello: the server clock (the session clock audio is stamped with) and who you are here
        await self.send_json({"type": "hello", "data": {"server_time": time.time(), "role": self.role,
                                                        "username": user.username, "after": self.last_seq}})
        await self._catch_up()
        self.sweep = LogSweep.of_running_loop()
        self.sweep.add(self)
        await self.on_joined()

    async def disconnect(self, code):
        if hasattr(self, "sweep"):
            self.sweep.discard(self)
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            await self.on_left()

    def swept(self, stored_last_seq: int) -> bool:
        """The sweep read the episode's stored last seq. Stalled: short of what was stored a sweep ago, and sent
        nothing since."""
        stalled = (self.stored_at_last_sweep is not None and self.last_seq < self.stored_at_last_sweep
                   and self.last_seq == self.sent_at_last_sweep)
        self.stored_at_last_sweep, self.sent_at_last_sweep = stored_last_seq, self.last_seq
        return stalled

    async def send_missed(self, batch: list[dict]) -> None:
        """Events the sweep read from the log (in seq order), of which this socket is sent those it was not."""
        async with self.log_lock:
            for message in batch:
                if message["seq"] > self.last_seq:
                    await self._send_event(message)

    async def _catch_up(self):
        while True:
            batch = await live_db(events_after, episode_id=self.episode_id, after=self.last_seq)
            for message in batch:
                await self._send_event(message)
            if len(batch) < 500:
                return

    async def _send_event(self, message: dict):
        await self.send(text_data=json.dumps(message))
        self.last_seq = message["seq"]

    async def episode_event(self, event):
        """A live event from the channel layer."""
        message = event["message"]
        async with self.log_lock:
            seq = message["seq"]
            if seq <= self.last_seq:
                return  # already sent by the replay or a sweep
            if seq > self.last_seq + 1:
                await self._catch_up()  # a missed publish: fill from the stored log
                if seq <= self.last_seq:
                    return
            await self._send_event(message)

    async def send(self, text_data=None, bytes_data=None, close=False):
        """Every frame to the client goes through here. A broadcast (presence, an event) can reach this
        consumer after its client went away and before daphne delivers the disconnect; that frame has no
        one to go to, and disconnect() follows."""
        try:
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)
        except Disconnected:
            pass

    async def send_json(self, payload: dict):
        await self.send(text_data=json.dumps(payload))

    async def send_error(self, message: str, *, command_id: str | None = None):
        """Errors about one client's own frame go only to that client and carry no seq."""
        await self.send_json({"type": "error", "id": command_id, "data": {"message": message}})

    async def receive(self, text_data=None, bytes_data=None):
        if self.closing:
            return  # frames already on their way when we closed
        if not self.bucket.take():
            self.closing = True
            user = self.scope.get("user")
            log.warning("closing a socket of %s on episode %s: over %s frames a second",
                        getattr(user, "username", "?"), getattr(self, "episode_id", "?"),
                        settings.LOUPE_WS_MAX_FRAMES_PER_SECOND)
            reason = (f"Too many frames: at most {settings.LOUPE_WS_MAX_FRAMES_PER_SECOND:g} a second. "
                      "Slow down, then reconnect.")
            await self.send_error(reason)  # daphne drops a close frame's reason text; the error carries it
            return await self.close(code=CLOSE_RATE_LIMITED, reason=reason)
        raw = text_data if text_data is not None else bytes_data
        if raw is not None and len(raw) > settings.LOUPE_WS_MAX_FRAME_BYTES:
            self.closing = True
            return await self.close(code=CLOSE_TOO_BIG)
        if text_data is None:
            return await self.send_error("Send commands as JSON text frames.")
        try:
            frame = json.loads(text_data)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested deeper than the parser goes
            return await self.send_error("That frame is not JSON; send {\"type\": ..., \"id\": ...}.")
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            return await self.send_error("A command is a JSON object with a string 'type' and a client 'id'.")
        await self.on_command(frame)

    # --- presence: who is watching (ephemeral view state, kept in Redis, sent without seq) ---------
    def _presence_key(self) -> str:
        return presence_key(self.episode_id)

    async def _presence_update(self, joined: bool):
        client = _presence_client()
        try:
            key = self._presence_key()
            if joined:
                await client.hset(key, self.channel_name, self.scope["user"].username)
                await client.expire(key, 24 * 3600)
            else:
                await client.hdel(key, self.channel_name)
            watchers = sorted({v.decode() for v in (await client.hgetall(key)).values()})
        except Exception:  # presence is a courtesy; a Redis blip must not break the session
            return
        await self.channel_layer.group_send(self.group, {"type": "presence.changed", "watchers": watchers})

    async def transcript_interim(self, event):
        """Provisional words of speech still going on (annotation/audio.py): a view, sent without seq."""
        await self.send_json({"type": "transcript.interim", "data": {
            k: event[k] for k in ("clip", "username", "committed_until", "words")}})

    async def live_frame(self, event):
        """A frame of the env's screen (annotation/live_view.py): a view, sent without seq, never stored."""
        await self.send_json({"type": "live.frame", "data": {
            k: event[k] for k in ("frame", "width", "height", "jpeg_b64")}})

    async def presence_changed(self, event):
        await self.send_json({"type": "presence", "data": {"watchers": event["watchers"]}})

    async def on_joined(self):
        await self._presence_update(joined=True)

    async def on_left(self):
        await self._presence_update(joined=False)

    async def on_command(self, frame: dict):
        try:
            result = await live_db(command_submit, episode_id=self.episode_id, user=self.scope["user"], frame=frame)
        except Exception:  # a failure storing one command must not cost the person their connection
            log.exception("command %r on episode %s failed", frame.get("type"), self.episode_id)
            return await self.send_error("That command could not be stored and was not applied; try again.",
                                         command_id=frame.get("id") if isinstance(frame.get("id"), str) else None)
        await self.send_json(result.message)
