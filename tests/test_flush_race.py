"""A transactional test's flush (tests/conftest.py) outlasts a server that still holds a table when the test ends: a
flush that loses the race is run again, instead of failing the test at its teardown."""
import threading
from contextlib import contextmanager

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection

from tests import conftest


@contextmanager
def _held(table: str, seconds: float):
    """Another session, as a server's would be, locks `table` against everyone for `seconds` from when this enters,
    then commits; the exit waits for it."""
    held = threading.Event()

    def hold():
        settings = connection.settings_dict
        with psycopg.connect(dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"],
                             port=settings["PORT"] or 5432) as other:
            other.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            held.set()
            threading.Event().wait(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10)
        yield
    finally:
        holder.join()


def _flush(table: str, attempts: int) -> None:
    # the flush's own statements, with a lock timeout short enough to lose the race while the other session holds it
    sql = ["SET LOCAL lock_timeout = '100ms'", *conftest._flush_by_delete(connection.ops, None, [table])]
    conftest._execute_flush_again_after_a_race(connection.ops, sql, attempts=attempts)


@pytest.fixture
def user_table(transactional_db) -> str:
    get_user_model().objects.create(username="left-by-a-test")
    return get_user_model()._meta.db_table


def test_a_flush_that_loses_the_race_for_a_lock_is_run_again_and_deletes_the_rows(user_table):
    with _held(user_table, 0.6):
        _flush(user_table, attempts=10)
    assert not get_user_model().objects.exists()


def test_a_flush_that_keeps_losing_fails_with_the_databases_reason_and_deletes_nothing(user_table):
    with _held(user_table, 3):
        with pytest.raises(OperationalError, match="lock timeout"):
            _flush(user_table, attempts=2)
    assert get_user_model().objects.filter(username="left-by-a-test").exists()
