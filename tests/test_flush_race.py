"""A transactional test's flush (tests/conftest.py) outlasts a server that still holds a table when the test ends: a
flush that loses the race is run again, instead of failing the test at its teardown."""
import threading

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection

from tests import conftest


def _hold(table: str, seconds: float, held: threading.Event) -> None:
    """Another session, as a server's would be: lock `table` against everyone for `seconds`, then commit."""
    settings = connection.settings_dict
    with psycopg.connect(dbname=settings["NAME"], user=settings["USER"], host=settings["HOST"],
                         port=settings["PORT"] or 5432) as other:
        other.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        held.set()
        threading.Event().wait(seconds)


def _flush_sql(table: str) -> list[str]:
    # the flush's own statements, with a lock timeout short enough to lose the race while the other session holds it
    return ["SET LOCAL lock_timeout = '100ms'", *conftest._flush_by_delete(connection.ops, None, [table])]


@pytest.mark.django_db(transaction=True)
def test_a_flush_that_loses_the_race_for_a_lock_is_run_again_and_deletes_the_rows():
    user_table = get_user_model()._meta.db_table
    get_user_model().objects.create(username="left-by-a-test")
    held = threading.Event()
    holder = threading.Thread(target=_hold, args=(user_table, 0.6, held))
    holder.start()
    try:
        assert held.wait(10)
        conftest._execute_flush_again_after_a_race(connection.ops, _flush_sql(user_table), attempts=10)
    finally:
        holder.join()
    assert not get_user_model().objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_flush_that_keeps_losing_fails_with_the_databases_reason_and_deletes_nothing():
    user_table = get_user_model()._meta.db_table
    get_user_model().objects.create(username="left-by-a-test")
    held = threading.Event()
    holder = threading.Thread(target=_hold, args=(user_table, 3, held))
    holder.start()
    try:
        assert held.wait(10)
        with pytest.raises(OperationalError, match="lock timeout"):
            conftest._execute_flush_again_after_a_race(connection.ops, _flush_sql(user_table), attempts=2)
    finally:
        holder.join()
    assert get_user_model().objects.filter(username="left-by-a-test").exists()
