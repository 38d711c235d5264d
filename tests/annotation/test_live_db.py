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
from flywheel.models import Project

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
