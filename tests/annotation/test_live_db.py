"""The live sockets' database pool (annotation/live_db.py): calls of different sockets run side by side, each thread
keeps its connection between calls, and a connection that a call or the server broke is never handed on."""
import asyncio
import threading
import time
from contextlib import suppress

import pytest
from django.db import DatabaseError, connection

from annotation import live_db as live_db_module
from annotation.live_db import live_db
from projects.models import Project

pytestmark = pytest.mark.django_db(transaction=True)  # the pool's threads use connections of their own


@pytest.fixture(autouse=True)
def own_pool(settings):
    """A pool made for each test (LOUPE_LIVE_DB_THREADS as the test sets it before its first call); after the test
    every thread of it closes its connection, so the test database can be dropped, and the process's pool is
    restored."""
    settings.LOUPE_LIVE_DB_THREADS = 2
    before, live_db_module._pool = live_db_module._pool, None
    yield settings
    pool, live_db_module._pool = live_db_module._pool, before
    if pool is not None:
        threads = pool._max_workers
        everyone_closed = threading.Barrier(threads, timeout=10)

        def close_mine():  # each waits for the others, so each runs on a thread of its own
            with suppress(DatabaseError):
                connection.close()
            everyone_closed.wait()

        for done in [pool.submit(close_mine) for _ in range(threads)]:
            done.result()
        pool.shutdown()


@pytest.fixture
def one_thread_pool(own_pool):
    own_pool.LOUPE_LIVE_DB_THREADS = 1


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_calls_of_different_sockets_run_side_by_side():
    """Under Django's thread-sensitive sync_to_async both calls would queue on one thread and the barrier break."""
    barrier = threading.Barrier(2, timeout=10)

    def meet() -> int:
        barrier.wait()
        return _backend_pid()

    async def two_sockets():
        return await asyncio.gather(live_db(meet), live_db(meet))

    first, second = asyncio.run(two_sockets())
    assert first != second  # two threads, two connections, at the same time


def test_a_thread_keeps_its_connection_between_calls(one_thread_pool):
    async def three_calls():
        return [await live_db(_backend_pid) for _ in range(3)]

    assert len(set(asyncio.run(three_calls()))) == 1


def test_a_connection_the_server_dropped_while_idle_is_replaced_before_the_next_call(one_thread_pool, monkeypatch):
    monkeypatch.setattr(live_db_module, "LIVE_IDLE_CHECK_SECONDS", 0.1)
    dropped = asyncio.run(live_db(_backend_pid))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [dropped])
    time.sleep(0.3)
    assert asyncio.run(live_db(_backend_pid)) != dropped  # a working connection, not a failed call


def test_a_transaction_a_call_left_open_is_rolled_back_not_reused(one_thread_pool):
    def leave_a_transaction_open():
        connection.set_autocommit(False)
        Project.objects.create(name="Never committed", slug="never-committed")

    asyncio.run(live_db(leave_a_transaction_open))
    assert asyncio.run(live_db(connection.get_autocommit)) is True
    assert not Project.objects.filter(slug="never-committed").exists()


def test_a_pool_of_no_threads_is_refused_in_words(settings):
    settings.LOUPE_LIVE_DB_THREADS = 0
    with pytest.raises(ValueError, match="LOUPE_LIVE_DB_THREADS must be at least 1, not 0"):
        asyncio.run(live_db(_backend_pid))


def _episode():
    from rollouts.models import Episode
    from projects.models import TaskSpec

    project = Project.objects.create(name="Live", slug=f"live-{time.monotonic_ns()}")
    task = TaskSpec.objects.create(project=project, task_name="click-button", split="train")
    return Episode.objects.create(project=project, task=task, seed=1, mode="supervised", status="running")


def _published_through(monkeypatch) -> list:
    """Where publishes go from a thread: recorded, so a test can tell that none went that way."""
    from rollouts import events

    sent = []
    monkeypatch.setattr(events._publisher, "send", lambda group, message, timeout: sent.append(message))
    return sent


def test_events_a_call_stored_are_broadcast_from_the_sockets_loop_after_the_call(monkeypatch):
    """The call's thread does not wait on Redis: the broadcast is sent from the loop the socket runs on."""
    from channels.layers import get_channel_layer

    from rollouts.events import episode_group, event_append

    episode = _episode()
    from_threads = _published_through(monkeypatch)
    layer = get_channel_layer()

    async def socket():
        channel = await layer.new_channel()
        await layer.group_add(episode_group(episode.pk), channel)
        stored = await live_db(event_append, episode_id=episode.pk, type="note", payload={"n": 1})
        message = await asyncio.wait_for(layer.receive(channel), 10)
        return stored, message

    stored, message = asyncio.run(socket())
    assert message["message"] == {"type": "note", "seq": stored.seq, "data": {"n": 1}}
    assert from_threads == []


def test_a_call_that_fails_after_committing_an_event_still_broadcasts_it(monkeypatch):
    from channels.layers import get_channel_layer

    from rollouts.events import episode_group, event_append

    episode = _episode()
    _published_through(monkeypatch)
    layer = get_channel_layer()

    def store_then_fail():
        event_append(episode_id=episode.pk, type="note", payload={})  # autocommit: stored at once
        raise RuntimeError("after the event")

    async def socket():
        channel = await layer.new_channel()
        await layer.group_add(episode_group(episode.pk), channel)
        with pytest.raises(RuntimeError, match="after the event"):
            await live_db(store_then_fail)
        return await asyncio.wait_for(layer.receive(channel), 10)

    assert asyncio.run(socket())["message"]["seq"] == 1


def test_an_event_of_a_rolled_back_call_is_neither_stored_nor_broadcast(monkeypatch):
    from django.db import transaction

    from rollouts.events import event_append
    from rollouts.models import Event

    episode = _episode()
    from_threads = _published_through(monkeypatch)

    def store_then_roll_back():
        with transaction.atomic():
            event_append(episode_id=episode.pk, type="note", payload={})
            raise RuntimeError("rolled back")

    async def call():
        with pytest.raises(RuntimeError):
            await live_db(store_then_roll_back)
        await asyncio.sleep(0.2)  # a broadcast task, had one been made, would have run

    sent = []
    monkeypatch.setattr("annotation.live_db.publish_collected", lambda collected: sent.append(collected))
    asyncio.run(call())
    assert not Event.objects.filter(episode=episode).exists()
    assert sent == [] and from_threads == []
    episode.refresh_from_db()
    assert episode.last_seq == 0
    with pytest.raises(ValueError, match="does not exist"):
        event_append(episode_id=episode.pk + 1000, type="note", payload={})


def test_work_deferred_after_the_reply_runs_once_the_caller_has_answered_and_at_once_outside_a_live_call():
    from annotation.live_db import after_reply

    order = []

    def call():
        after_reply(lambda: order.append(("deferred", threading.current_thread().name)))
        order.append("call")
        return "answer"

    async def socket():
        order.append(await live_db(call))  # the socket's answer: its code right after the await
        for _ in range(100):
            if len(order) == 3:
                break
            await asyncio.sleep(0.05)

    asyncio.run(socket())
    assert order[:2] == ["call", "answer"]
    assert order[2][0] == "deferred" and order[2][1].startswith("loupe-live-db")
    after_reply(lambda: order.append("now"))
    assert order[-1] == "now"


def test_a_command_stored_through_the_live_pool_still_wakes_the_worker():
    """The wake-up (NOTIFY) is sent after the ack (annotation/services.py), not dropped."""
    import psycopg

    from annotation.services import command_submit, notify_channel
    from annotation.supervision import _conninfo
    from tests.factories import make_member, make_user

    episode = _episode()
    user = make_user()
    make_member(episode.project, user)
    with psycopg.connect(_conninfo(), autocommit=True) as worker:
        worker.execute(f'LISTEN "{notify_channel(episode.pk)}"')
        result = asyncio.run(live_db(command_submit, episode_id=episode.pk, user=user,
                                     frame={"type": "pause", "id": "p1"}))
        assert result.ok
        woken = next(worker.notifies(timeout=10, stop_after=1))
    assert int(woken.payload) == episode.commands.get(client_id="p1").pk
