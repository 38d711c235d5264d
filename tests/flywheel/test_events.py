"""Publishing on the channel layer (flywheel/events.py): from any thread, in order, and from a forked worker process
whose parent published before the fork (Celery's prefork pool), through the real Redis channel layer."""
import asyncio
import multiprocessing
import threading
import uuid

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from flywheel.events import group_send


def _listener(group: str) -> tuple[str, object]:
    layer = get_channel_layer()

    async def join():
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    return async_to_sync(join)(), layer


def _received(layer, channel: str, count: int) -> list[int]:
    async def take():
        return [(await asyncio.wait_for(layer.receive(channel), 10))["n"] for _ in range(count)]

    return async_to_sync(take)()


def test_sends_from_threads_running_their_own_event_loop_all_arrive_in_order():
    """A rollout worker's thread keeps Playwright's event loop running, where async_to_sync refuses to run."""
    group = f"events-test-{uuid.uuid4().hex}"
    channel, layer = _listener(group)
    failures = []

    def from_a_thread_with_a_loop():
        async def inside_a_loop():
            for n in range(20):
                group_send(group, {"type": "x", "n": n})

        try:
            asyncio.run(inside_a_loop())
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    thread = threading.Thread(target=from_a_thread_with_a_loop)
    thread.start()
    thread.join(30)
    assert not failures
    assert _received(layer, channel, 20) == list(range(20))


def _publish_in_child(group: str) -> None:
    group_send(group, {"type": "x", "n": 1}, timeout=10)


def test_a_forked_child_publishes_after_its_parent_did():
    """Without starting its own loop, a child would wait forever on the parent's publishing thread, absent in it."""
    group = f"events-test-{uuid.uuid4().hex}"
    channel, layer = _listener(group)
    group_send(group, {"type": "x", "n": 0})
    child = multiprocessing.get_context("fork").Process(target=_publish_in_child, args=(group,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert _received(layer, channel, 2) == [0, 1]


class _GatedLayer:
    """A channel layer whose sends wait for the test to open a gate: what a stalled Redis looks like to a sender."""

    def __init__(self):
        self.gate = threading.Event()
        self.sent: list[int] = []

    async def group_send(self, group, message):
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        self.sent.append(message["message"]["seq"])


def test_publish_returns_before_the_layer_answers_and_events_still_go_out_in_seq_order(monkeypatch):
    """A command's acknowledgement must not wait on the Redis round trips of the events it wrote (issue 22)."""
    from flywheel import events

    layer = _GatedLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    for seq in range(1, 6):
        events.publish(7, {"type": "x", "seq": seq, "data": {}})
    assert layer.sent == []  # all five returned while the layer had answered none
    assert not events.publish_drain(0.2)  # still queued
    layer.gate.set()
    assert events.publish_drain(10)
    assert layer.sent == [1, 2, 3, 4, 5]


def test_a_full_publish_queue_refuses_the_next_event_with_a_warning_and_keeps_the_queued_ones(monkeypatch, caplog):
    """A stalled channel layer must not grow a worker's memory without bound: past the cap an event is left to the
    log (watchers fill it in from there) and said so."""
    from flywheel import events

    layer = _GatedLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(events, "MAX_QUEUED_PUBLISHES", 2)
    events.publish(8, {"type": "x", "seq": 1, "data": {}})
    events.publish(8, {"type": "x", "seq": 2, "data": {}})
    with caplog.at_level("WARNING", logger="flywheel.events"):
        events.publish(8, {"type": "x", "seq": 3, "data": {}})
    assert "not publishing event 3 of episode 8" in caplog.text
    layer.gate.set()
    assert events.publish_drain(10)
    assert layer.sent == [1, 2]


def test_a_failed_publish_is_logged_and_the_next_one_still_goes_out(monkeypatch, caplog):
    from flywheel import events

    sent = []

    class Failing:
        async def group_send(self, group, message):
            seq = message["message"]["seq"]
            if seq == 1:
                raise ConnectionError("redis went away")
            sent.append(seq)

    monkeypatch.setattr(events, "get_channel_layer", lambda: Failing())
    with caplog.at_level("WARNING", logger="flywheel.events"):
        events.publish(9, {"type": "x", "seq": 1, "data": {}})
        events.publish(9, {"type": "x", "seq": 2, "data": {}})
        assert events.publish_drain(10)
    assert "could not publish event 1 of episode 9" in caplog.text
    assert sent == [2]
