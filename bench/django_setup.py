"""Django for the benches that work in the configured database (DATABASE_URL, else the embedded one): its
settings, the database created when the server has none of that name, then every migration applied, so a bench runs
on a fresh database as on one `make run` migrated.
(bench_review, bench_rollout and bench_cycle make databases of their own with create_test_db, which migrates.)"""
from __future__ import annotations

import os


def setup_django(*, channel_prefix: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("LOUPE_CHANNEL_PREFIX", channel_prefix)
    os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")
    import django
    from django.core.management import call_command

    django.setup()
    _database_made()
    call_command("migrate", interactive=False, verbosity=0)


def _database_made() -> None:
    """Create the configured database if its server has none of that name (a DATABASE_URL naming a database not
    made yet: a fresh server has only its defaults); any other connection failure is left to Django to report."""
    import psycopg
    from django.conf import settings
    from psycopg import errors, sql

    db = settings.DATABASES["default"]
    params = {key: value for key, value in {"host": db.get("HOST"), "port": str(db.get("PORT") or ""),
                                             "user": db.get("USER"), "password": db.get("PASSWORD")}.items() if value}
    try:
        psycopg.connect(dbname=db["NAME"], connect_timeout=10, **params).close()
        return
    except psycopg.OperationalError as exc:
        if getattr(exc, "sqlstate", None) != "3D000" and "does not exist" not in str(exc):  # invalid_catalog_name
            return
    with psycopg.connect(dbname="postgres", autocommit=True, connect_timeout=10, **params) as conn:
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db["NAME"])))
        except errors.DuplicateDatabase:
            pass  # another bench made it meanwhile
