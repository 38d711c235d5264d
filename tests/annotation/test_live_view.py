"""The live view's gate (rate, change, byte cap) on hand-worked timelines, and the LiveView loop around an env."""
import io
import random

import pytest
from PIL import Image

from agent.envs.base import LiveFrame
from annotation.live_view import FrameGate, LiveView, Outgoing, fit_jpeg


def _jpeg(seed: int, size=(320, 240), quality=95) -> bytes:
    """A noisy picture: JPEG cannot shrink noise much, so its size depends on the quality."""
    rng = random.Random(seed)
    image = Image.frombytes("RGB", size, bytes(rng.randrange(256) for _ in range(size[0] * size[1] * 3)))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


A, B = b"\xff\xd8 picture A", b"\xff\xd8 picture B"  # small enough never to be re-encoded


def test_the_gate_sends_changed_pictures_at_most_fps_and_keepalives_or_repeats_for_an_unchanged_screen():
    gate = FrameGate(fps=4, max_bytes=10_000, keepalive_s=1.0, repeat_s=5.0)  # a message every 0.25 s at most
    timeline = [
        (0.0, A, Outgoing(A)),  # the first frame goes at once
        (0.125, B, None),  # changed, but 0.25 s have not passed
        (0.25, A, None),  # due, but unchanged and no keepalive due (0.25 s since the picture)
        (0.375, B, Outgoing(B)),  # changed: sent
        (0.625, B, None),
        (1.375, B, Outgoing(None)),  # 1 s since the last message: a keepalive without the picture
        (1.5, B, None),  # 0.125 s since the keepalive
        (2.375, B, Outgoing(None)),
        (5.375, B, Outgoing(B)),  # 5 s since the picture went: the picture again, for people who joined since
        (5.625, A, Outgoing(A)),
    ]
    for now, jpeg, expected in timeline:
        assert gate.offer(jpeg, now) == expected, now
    assert gate.wait_s(5.75) == 0.125 and gate.wait_s(6.0) == 0.0
    gate.reset()  # a new proposal shows: the next frame goes whole and at once, even unchanged
    assert gate.offer(A, 5.75) == Outgoing(A)


def test_a_picture_over_the_byte_cap_is_re_encoded_smaller_or_skipped():
    big = _jpeg(1)
    small = fit_jpeg(big, len(big) // 2)
    assert small is not None and len(small) <= len(big) // 2
    assert Image.open(io.BytesIO(small)).size == (320, 240)
    assert fit_jpeg(big, len(big)) is big  # one that fits is sent as it is
    assert fit_jpeg(big, 500) is None  # no quality gets noise into 500 bytes

    gate = FrameGate(fps=2, max_bytes=500)
    assert gate.offer(big, 0.0) is None and gate.skipped_too_big == 1
    assert gate.offer(A, 0.1) == Outgoing(A)  # a skipped picture takes no slot: the next one may go at once


class _Screen:
    """An env's frame source as the supervisor sees it: the frames it is given, in turn."""

    def __init__(self, frames):
        self.frames, self.grabs, self.stopped = list(frames), 0, 0

    def live_frame(self):
        self.grabs += 1
        frame = self.frames.pop(0) if self.frames else self.last
        if isinstance(frame, Exception):
            raise frame
        self.last = frame
        return frame

    def live_stop(self):
        self.stopped += 1


def _view(screen, watchers=1):
    sent, clock = [], [0.0]
    view = LiveView(episode_id=7, env=screen, fps=4, max_bytes=10_000, publish=lambda e, m: sent.append((e, m)),
                    watchers=lambda e: watchers, clock=lambda: clock[0])
    return view, sent, clock


def test_live_view_publishes_numbered_frames_of_the_env_screen_and_nothing_when_nobody_watches():
    frame = LiveFrame(jpeg=A, width=1280, height=720)
    view, sent, clock = _view(_Screen([None, frame, frame]))
    assert view.tick() == 0.05 and sent == []  # a screencast just started has no frame yet
    assert view.tick() == 0.25
    assert sent == [(7, {"type": "live.frame", "frame": 1, "width": 1280, "height": 720, "jpeg_b64": "/9ggcGljdHVyZSBB"})]
    assert view.tick() == 0.25 and len(sent) == 1  # not due yet: the env was not asked
    clock[0] = 1.0
    view.tick()
    assert sent[-1][1]["frame"] == 2 and sent[-1][1]["jpeg_b64"] is None  # unchanged for 1 s: a keepalive
    view.stop()
    assert view.env.stopped == 1

    screen = _Screen([frame])
    view, sent, _ = _view(screen, watchers=0)
    assert view.tick() == 2.0 and sent == [] and screen.grabs == 0


def test_a_failing_screen_turns_the_live_view_off_for_the_episode():
    screen = _Screen([RuntimeError("X connection broken")])
    view, sent, _ = _view(screen)
    assert view.tick() == 3600.0 and view.off and sent == []
    view.tick()
    view.stop()
    assert screen.grabs == 1 and screen.stopped == 0


def test_after_a_failed_publish_the_live_view_stays_quiet_then_sends_the_picture_whole():
    calls, clock = [], [0.0]

    def publish(episode_id, message):
        calls.append(message)
        if len(calls) == 1:
            raise ConnectionError("Redis is away")

    view = LiveView(episode_id=7, env=_Screen([LiveFrame(jpeg=A, width=160, height=210)]), fps=4, max_bytes=10_000,
                    publish=publish, watchers=lambda e: 1, clock=lambda: clock[0])
    view.tick()
    clock[0] = 1.0
    assert view.tick() == 1.0 and len(calls) == 1  # quiet for 2 s: the wait for commands is not held up
    clock[0] = 2.0
    view.tick()
    assert len(calls) == 2 and calls[1]["jpeg_b64"] is not None  # unchanged, but the lost picture goes again
    assert view.bytes_sent == len(A)


def test_a_screen_without_frames_is_looked_at_often_at_first_then_once_a_frame_time():
    view, sent, _ = _view(_Screen([None] * 12))
    assert [view.tick() for _ in range(12)] == [0.05] * 9 + [0.25] * 3 and sent == []
