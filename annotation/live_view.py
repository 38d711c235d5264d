"""The live view: while the supervisor waits for a person (a proposal to decide, a takeover to act in), the env's
screen streams to the episode's watchers, a few frames a second, so what they click on is what is on the screen now.

Frames are a view, like presence: published on the channel layer and forwarded by the consumer as ``live.frame``
messages without seq, never stored (the stored step keeps its one screenshot). Bandwidth is bounded three ways
(:class:`FrameGate`): at most ``LOUPE_LIVE_FPS`` frames a second, a picture only when the screen changed (an unchanged
one sends a keepalive without the picture every second, and the picture again every few seconds for people who joined
since), and at most ``LOUPE_LIVE_MAX_FRAME_BYTES`` a picture (re-encoded at a lower quality, or skipped). Nothing is
grabbed while nobody is connected to the episode (the consumer's presence hash in Redis).
"""
from __future__ import annotations

import base64
import hashlib
import io
import logging
import time
from dataclasses import dataclass
from typing import Callable

from rollouts.events import episode_group, group_send

log = logging.getLogger(__name__)

KEEPALIVE_S = 1.0  # an unchanged screen: a message without the picture this often keeps the page's "Live" badge on
REPEAT_S = 5.0  # ... and the picture itself again this often, for someone who joined since it last changed
PRESENCE_EVERY_S = 2.0  # how often the watchers are counted (one HLEN)
NO_FRAME_YET_S = 0.05  # a screencast just started has no frame yet: look again this soon (a few times)
NO_FRAME_TRIES = 10
PUBLISH_TIMEOUT_S = 0.5  # a frame is not worth holding up the wait for commands
QUIET_AFTER_FAILURE_S = 2.0  # after a failed publish (Redis away), send nothing for this long
REENCODE_QUALITIES = (45, 30, 20)


def presence_key(episode_id: int) -> str:
    """The Redis hash of the episode's connected sockets (channel name -> username), kept by the consumer."""
    from django.conf import settings

    return f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}:presence:{episode_id}"


def fit_jpeg(jpeg: bytes, max_bytes: int) -> bytes | None:
    """``jpeg`` itself when it fits in ``max_bytes``, else the same picture re-encoded at lower qualities until one
    fits; None when none does."""
    if len(jpeg) <= max_bytes:
        return jpeg
    from PIL import Image

    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    for quality in REENCODE_QUALITIES:
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=quality)
        if buffer.tell() <= max_bytes:
            return buffer.getvalue()
    return None


@dataclass(frozen=True)
class Outgoing:
    """A frame to send: the picture, or None for a keepalive (the screen has not changed)."""

    jpeg: bytes | None


class FrameGate:
    """Decides which of the env's frames go out; pure (the caller passes the clock's reading).

    - at most one message every ``1 / fps`` seconds;
    - a changed picture goes out (fitted into ``max_bytes``; one that cannot fit is skipped);
    - an unchanged one: a keepalive every ``keepalive_s``, the picture again every ``repeat_s``.
    ``reset()`` (a new proposal is showing) makes the next frame go out whole, at once.
    """

    def __init__(self, *, fps: float, max_bytes: int, keepalive_s: float = KEEPALIVE_S, repeat_s: float = REPEAT_S):
        if fps <= 0:
            raise ValueError("fps must be positive")
        self.period = 1.0 / fps
        self.max_bytes = max_bytes
        self.keepalive_s, self.repeat_s = keepalive_s, repeat_s
        self.skipped_too_big = 0
        self.reset()

    def reset(self) -> None:
        self.sent_at: float | None = None  # the last message, picture or keepalive
        self.picture_at: float | None = None  # the last picture
        self.digest: bytes | None = None  # of the last source frame offered and sent

    def wait_s(self, now: float) -> float:
        """Seconds until a message may go out again."""
        return 0.0 if self.sent_at is None else max(0.0, self.sent_at + self.period - now)

    def offer(self, jpeg: bytes, now: float) -> Outgoing | None:
        if self.wait_s(now) > 0:
            return None
        digest = hashlib.blake2b(jpeg, digest_size=16).digest()
        if digest == self.digest and self.picture_at is not None:
            if now - self.picture_at >= self.repeat_s:
                return self._picture(jpeg, digest, now)
            if now - self.sent_at >= self.keepalive_s:
                self.sent_at = now
                return Outgoing(None)
            return None
        return self._picture(jpeg, digest, now)

    def _picture(self, jpeg: bytes, digest: bytes, now: float) -> Outgoing | None:
        fitted = fit_jpeg(jpeg, self.max_bytes)
        if fitted is None:
            self.skipped_too_big += 1
            return None
        self.sent_at = self.picture_at = now
        self.digest = digest
        return Outgoing(fitted)


def _publish(episode_id: int, message: dict) -> None:
    group_send(episode_group(episode_id), message, timeout=PUBLISH_TIMEOUT_S)


_redis = None  # one client a process, made where it is used (after a worker's fork)


def _watchers(episode_id: int) -> int:
    global _redis
    if _redis is None:
        import redis
        from django.conf import settings

        _redis = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    return int(_redis.hlen(presence_key(episode_id)))


class LiveView:
    """Streams one env's screen to one episode's watchers; the supervisor calls :meth:`tick` while it waits.

    ``publish(episode_id, message)`` and ``watchers(episode_id)`` are the channel layer and the presence hash by
    default. Any failure of the env's frame source turns the live view off for the episode (logged once): the
    stored steps and their screenshots do not depend on it."""

    def __init__(self, *, episode_id: int, env, fps: float, max_bytes: int,
                 publish: Callable[[int, dict], None] = _publish, watchers: Callable[[int], int] = _watchers,
                 clock: Callable[[], float] = time.monotonic):
        self.episode_id, self.env = episode_id, env
        self.gate = FrameGate(fps=fps, max_bytes=max_bytes)
        self.publish, self.watchers, self.clock = publish, watchers, clock
        self.frame = 0  # messages sent, numbering them for the page
        self.bytes_sent = 0
        self.grab_ms: list[float] = []  # the last grabs' durations (the bench reads them)
        self.off = False
        self._watched: bool = True
        self._counted_at: float | None = None
        self._misses = 0  # looks in a row that found no frame
        self._quiet_until = 0.0

    def reset(self) -> None:
        """A new proposal is showing: the next frame goes out whole and at once."""
        self.gate.reset()

    def stop(self) -> None:
        """The wait is over (the step runs now): the env may stop producing frames."""
        if self.off:
            return
        try:
            self.env.live_stop()
        except Exception:  # noqa: BLE001 - the step that follows reports a broken env properly
            log.debug("stopping the live view of episode %s failed", self.episode_id, exc_info=True)

    def _anyone_watching(self, now: float) -> bool:
        if self._counted_at is None or now - self._counted_at >= PRESENCE_EVERY_S:
            self._counted_at = now
            try:
                self._watched = self.watchers(self.episode_id) > 0
            except Exception:  # noqa: BLE001 - presence is a courtesy: stream when it cannot be read
                self._watched = True
        return self._watched

    def tick(self) -> float:
        """Send a frame if one is due and someone watches; returns the seconds until the next look."""
        if self.off:
            return 3600.0
        now = self.clock()
        wait = max(self.gate.wait_s(now), self._quiet_until - now)
        if wait > 0:
            return wait
        if not self._anyone_watching(now):
            return PRESENCE_EVERY_S
        started = self.clock()
        try:
            frame = self.env.live_frame()
        except Exception:  # noqa: BLE001 - see the class docstring
            log.warning("live view of episode %s turned off: the screen could not be read", self.episode_id,
                        exc_info=True)
            self.off = True
            return 3600.0
        now = self.clock()
        self.grab_ms = (self.grab_ms + [(now - started) * 1000])[-50:]
        if frame is None:
            self._misses += 1
            return NO_FRAME_YET_S if self._misses < NO_FRAME_TRIES else self.gate.period
        self._misses = 0
        out = self.gate.offer(frame.jpeg, now)
        if out is not None:
            self._send(out, frame.width, frame.height)
        return self.gate.period  # sent, or unchanged and nothing due: look again a frame's time later

    def _send(self, out: Outgoing, width: int, height: int) -> None:
        self.frame += 1
        encoded = base64.b64encode(out.jpeg).decode("ascii") if out.jpeg is not None else None
        message = {"type": "live.frame", "frame": self.frame, "width": width, "height": height, "jpeg_b64": encoded}
        try:
            self.publish(self.episode_id, message)
        except Exception:  # noqa: BLE001 - a view: a Redis blip loses frames, later ones follow
            log.debug("could not publish live frame %s of episode %s", self.frame, self.episode_id, exc_info=True)
            self._quiet_until = self.clock() + QUIET_AFTER_FAILURE_S
            self.gate.reset()  # the next one goes whole
            return
        self.bytes_sent += len(out.jpeg or b"")
