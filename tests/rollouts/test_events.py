"""Publishing on the channel layer (rollouts/events.py): from any thread, in order, and from a forked worker process
whose parent published before the fork (Celery's prefork pool), through the real Redis channel layer."""
import asyncio
import multiprocessing
import threading
import uuid

from rollouts.events import group_send
from tests.layer_listener import GroupListener


def _received(listener: GroupListener, count: int) -> list[int]:
    return [listener.receive(10)["n"] for _ in range(count)]


def test_sends_from_threads_running_their_own_event_loop_all_arrive_in_order():
    """A rollout worker's thread keeps Playwright's event loop running, where async_to_sync refuses to run."""
    group = f"events-test-{uuid.uuid4().hex}"
    failures = []

    def from_a_thread_with_a_loop():
        async def inside_a_loop():
            for n in range(20):
                group_send(group, {"type": "x", "n": n})

        try:
            asyncio.run(inside_a_loop())
        except Exception as exc:  # noqa: BLE001 - reported by the assert below
            failures.append(exc)

    with GroupListener(group) as listener:
        thread = threading.Thread(target=from_a_thread_with_a_loop)
        thread.start()
        thread.join(30)
        assert not failures
        assert _received(listener, 20) == list(range(20))


def _publish_in_child(group: str) -> None:
    group_send(group, {"type": "x", "n": 1}, timeout=10)


def test_a_forked_child_publishes_after_its_parent_did():
    """Without starting its own loop, a child would wait forever on the parent's publishing thread, absent in it."""
    group = f"events-test-{uuid.uuid4().hex}"
    with GroupListener(group) as listener:
        group_send(group, {"type": "x", "n": 0})
        child = multiprocessing.get_context("fork").Process(target=_publish_in_child, args=(group,))
        child.start()
        child.join(30)
        assert child.exitcode == 0
        assert _received(listener, 2) == [0, 1]
