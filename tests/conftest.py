"""Shared fixtures: real PostgreSQL and Redis (CI's, or the embedded ones), and real server processes."""
from __future__ import annotations

import contextlib
import os
import time

import pytest
from django.db.backends.postgresql.operations import DatabaseOperations

from tests.factories import *  # noqa: E402,F401,F403
from tests.stack import *  # noqa: E402,F401,F403

# Modules that take half a minute or more, longest first. `make test` hands modules to its two workers in collection
# order (`--no-loadscope-reorder`): run these first, so that no worker is left at the end with one long module while
# the other has finished; the many short ones that follow even the two out. (xdist's default order, most tests first,
# put the one-test training modules last and left a worker alone with them for minutes.)
# By their summed times (setup included) in a two-worker run of 1,536 tests (junit XML, December 7 2026, a fresh
# clone's `bash .ci/run` beside a flywheel bench on 2 cores: 104 s for test_vlm_grpo_run down to 24 s), the 36 modules
# of 24 s or more. Re-sort after a full run when a module's time moves (.data/logs/pytest-junit.xml).
SLOW_MODULES_FIRST = (
    "tests/training/test_vlm_grpo_run.py",
    "tests/agent/test_webapp_env.py",
    "tests/e2e/test_think_aloud.py",
    "tests/webapp/test_fuzz.py",
    "tests/agent/test_desktop_env.py",  # not among the first two: the suite's start is its busiest minute
    "tests/trainer/test_distributed.py",
    "tests/cycles/test_cycles.py",
    "tests/reliability/test_outages.py",
    "tests/cycles/test_learned.py",
    "tests/envservice/test_env_grpo.py",
    "tests/cycles/test_vlm_flywheel.py",
    "tests/reliability/test_process_kills.py",
    "tests/cycles/test_cycles_faults.py",
    "tests/agent/test_miniwob_env.py",
    "tests/annotation/test_audio_api.py",
    "tests/e2e/test_cycles.py",
    "tests/test_flywheel_split_migration.py",
    "tests/rollouts/test_lanes.py",
    "tests/e2e/test_desktop_session.py",
    "tests/rollouts/test_rollout_faults.py",
    "tests/webapp/test_permission_matrix.py",
    "tests/agent/test_sandbox.py",
    "tests/e2e/test_voice_commands.py",
    "tests/annotation/test_supervision_waits.py",
    "tests/training/test_warm_trainer.py",
    "tests/trainer/test_vlm_gpu_check.py",
    "tests/e2e/test_csp.py",
    "tests/trainer/test_data_and_cli.py",
    "tests/trainer/test_vlm.py",
    "tests/rollouts/test_desktop_rollouts.py",
    "tests/bench/test_django_setup.py",
    "tests/annotation/test_speech.py",
    "tests/rollouts/test_webapp_rollouts.py",
    "tests/annotation/test_live_session.py",
    "tests/bench/test_bench_coldstart.py",
    "tests/e2e/test_review.py",
)


def pytest_collection_modifyitems(config, items):
    # a module moved or renamed would silently lose its place (and be handed out last): say so instead
    moved = [module for module in SLOW_MODULES_FIRST if not (config.rootpath / module).is_file()]
    if moved:
        raise pytest.UsageError(f"tests/conftest.py SLOW_MODULES_FIRST names modules that do not exist: {moved}")
    rank = {module: i for i, module in enumerate(SLOW_MODULES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep their order


# Tables whose rows only migrations make, the same after every flush: the flush keeps them, so the post_migrate that
# follows it finds every content type and permission there instead of making 170 rows again.
_KEPT_BY_FLUSH = frozenset({"django_content_type", "auth_permission"})


def _flush_by_delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    """What a transactional test's flush runs: DELETE instead of TRUNCATE. TRUNCATE makes every table's files anew
    and took 1.4-1.6 s for the 48 tables at every such test (about 150 of them); deleting the few rows a test made
    takes some 20 ms. The tables are locked first against writers, as TRUNCATE's lock does (readers go on): a server
    still writing commits before the rows go. Every foreign key is DEFERRABLE INITIALLY DEFERRED (Django's), so the
    order of the deletes does not matter."""
    if reset_sequences:
        return _truncate_flush(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
    quoted = [self.quote_name(table) for table in tables if table not in _KEPT_BY_FLUSH]
    if not quoted:
        return []
    return ["SET CONSTRAINTS ALL DEFERRED", f"LOCK TABLE {', '.join(quoted)} IN SHARE ROW EXCLUSIVE MODE",
            *(f"DELETE FROM {table}" for table in quoted)]


_truncate_flush = DatabaseOperations.sql_flush
_execute_flush = DatabaseOperations.execute_sql_flush

# What PostgreSQL says when the flush lost a race with a server that was still writing: a deadlock (the flush's LOCK
# takes its tables one by one, and a server's transaction that holds one of them can wait for another the flush
# holds), a serialization failure, a lock it could not get. The server's transaction or the flush is rolled back;
# the flush again finds the tables free.
_FLUSH_RACES = frozenset({"40P01", "40001", "55P03"})


def _execute_flush_again_after_a_race(self, sql_list, *, attempts=5):
    """The flush in one transaction, again (up to `attempts` times) when it lost a race with a writer; any other
    error as it came. A test's servers (daphne, a Celery worker) may still be finishing a write when the test ends:
    one such deadlock failed a whole CI run at a test's teardown ("Database test_test_gw1 couldn't be flushed")."""
    from django.db import OperationalError

    for attempt in range(1, attempts + 1):
        try:
            return _execute_flush(self, sql_list)
        except OperationalError as error:
            if getattr(error.__cause__, "sqlstate", None) not in _FLUSH_RACES or attempt == attempts:
                raise
            time.sleep(0.1 * attempt)


@pytest.fixture(scope="session", autouse=True)
def _fast_flush():
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "sql_flush", _flush_by_delete)
        patch.setattr(DatabaseOperations, "execute_sql_flush", _execute_flush_again_after_a_race)
        yield


_TEMPLATE_PREFIX = "loupe_migrated_"
_TEMPLATE_LOCK = 0x10C0_7E57  # pg_advisory_lock key: one process at a time builds or drops templates


def _migrations_digest() -> str:
    """What the migrated schema is a function of: every migration file of ours, the installed apps, Django's version."""
    import hashlib
    from pathlib import Path

    import django
    from django.conf import settings

    digest = hashlib.sha256(f"{django.__version__}\n{settings.INSTALLED_APPS}\n".encode())
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.glob("*/migrations/*.py")):
        digest.update(f"{path.relative_to(root)}\n".encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _url(params: dict, dbname: str) -> str:
    """A DATABASE_URL for ``params`` (psycopg's) naming ``dbname``; a socket directory as host is quoted whole."""
    from urllib.parse import quote

    login = quote(params["user"] or "", safe="") + (f":{quote(params['password'], safe='')}" if params["password"] else "")
    port = f":{params['port']}" if params["port"] else ""
    return f"postgres://{login}{'@' if login else ''}{quote(str(params['host'] or ''), safe='')}{port}/{dbname}"


def _migrated_template(config: dict) -> str:
    """The name of a database that holds this checkout's migrated schema, building it first if no run has: each
    pytest process (a worker each) copies it (CREATE DATABASE ... TEMPLATE, 0.25 s) instead of running the 43
    migrations (23 s, 12 of them CPU). Built under a temporary name by `manage.py migrate` and renamed when done, so a
    build that dies leaves no template half made; templates of other migrations are dropped once an hour old."""
    import subprocess
    import sys
    from pathlib import Path

    import psycopg

    name = _TEMPLATE_PREFIX + _migrations_digest()
    params = {"host": config.get("HOST") or None, "port": config.get("PORT") or None, "user": config.get("USER") or None,
              "password": config.get("PASSWORD") or None, "dbname": "postgres"}
    with psycopg.connect(**{k: v for k, v in params.items() if v}, autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
        try:
            made_at = dict(admin.execute("SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database "
                                         "WHERE datname LIKE %s", (_TEMPLATE_PREFIX + "%",)).fetchall())
            if name not in made_at:
                building = name + "_building"
                admin.execute(f'DROP DATABASE IF EXISTS "{building}"')
                admin.execute(f'CREATE DATABASE "{building}"')
                env = {**os.environ, "DATABASE_URL": _url(params, building)}
                subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=Path(__file__).parents[1],
                               env=env, check=True, stdout=subprocess.DEVNULL)
                admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
                admin.execute(f"COMMENT ON DATABASE \"{name}\" IS '{time.time():.0f}'")
            for stale, made in made_at.items():  # the "_building" one of a build that died matches too
                if stale != name and (not made or not made.isdigit() or time.time() - int(made) > 3600):
                    with contextlib.suppress(psycopg.Error):  # in use by a run of other migrations: its next run
                        admin.execute(f'DROP DATABASE "{stale}"')
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))
    return name


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Each pytest process's test database starts as a copy of the migrated template (_migrated_template); migrate
    then finds every migration applied (some 2 s for its post_migrate). LOUPE_TEST_DB_TEMPLATE=0 migrates afresh."""
    from django.conf import settings

    config = settings.DATABASES["default"]
    if os.environ.get("LOUPE_TEST_DB_TEMPLATE", "1") != "0" and config["ENGINE"].endswith("postgresql"):
        config.setdefault("TEST", {})["TEMPLATE"] = _migrated_template(config)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database commits without waiting for its WAL to reach the disk (an fsync took 2.7 ms a commit here):
    the tests' and their servers' connections, made after this, all do. A crash of the machine's PostgreSQL could
    lose the last commits of a database that is thrown away anyway; the reliability tests that crash a PostgreSQL
    crash a private one, which keeps its commits synchronous."""
    from django.db import connection

    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            name = connection.ops.quote_name(connection.settings_dict["NAME"])
            cursor.execute(f"ALTER DATABASE {name} SET synchronous_commit = off")
            cursor.execute("SET synchronous_commit = off")
    yield


@pytest.fixture(autouse=True)
def _clear_cache():
    """Forget what the cache holds (login throttling) between tests: only the cache's own keys. cache.clear() is
    FLUSHDB, and the Celery broker's queues and bindings and the channel layer share that Redis database: a
    flush between tests made later tasks route nowhere and events go missing while a module's worker ran."""
    import redis
    from django.conf import settings

    config = settings.CACHES["default"]
    pattern = f"{config['KEY_PREFIX']}:{config.get('VERSION', 1)}:*"
    client = redis.Redis.from_url(settings.REDIS_URL)
    try:
        keys = list(client.scan_iter(match=pattern, count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
    yield
