"""Every bench sets up the database it uses: on a fresh, empty one it must not die on a missing table."""
import ast
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted((ROOT / "bench").glob("bench_*.py"))


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


@pytest.mark.parametrize("script", BENCHES, ids=lambda p: p.stem)
def test_a_bench_that_uses_django_migrates_its_database_first(script):
    """Either the configured database, migrated by bench.django_setup, or one of its own made by
    create_test_db (which migrates); never django.setup() alone on whatever database is there."""
    tree = ast.parse(script.read_text())
    calls = _calls(tree)
    if "setup" not in calls and "setup_django" not in calls:
        return  # no Django (env, trainer, coldstart)
    assert "setup_django" in calls or "create_test_db" in calls, f"{script.name} uses Django without migrating"


def _database_url(name: str) -> tuple[str, dict]:
    db = settings.DATABASES["default"]
    params = {"dbname": "postgres", "user": db.get("USER") or "postgres", "host": db.get("HOST") or "",
              "port": str(db.get("PORT") or 5432), "password": db.get("PASSWORD") or None}
    auth = quote(params["user"]) + (":" + quote(params["password"]) if params["password"] else "")
    host = params["host"]
    url = (f"postgresql://{auth}@/{name}?host={host}" if host.startswith("/")
           else f"postgresql://{auth}@{host or '127.0.0.1'}:{params['port']}/{name}")
    return url, {k: v for k, v in params.items() if v}


@pytest.fixture
def fresh_database_url():
    name = f"loupe_fresh_{uuid.uuid4().hex[:10]}"
    url, params = _database_url(name)
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield url
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_setup_django_migrates_a_fresh_database(fresh_database_url):
    script = ("from bench.django_setup import setup_django; setup_django(channel_prefix='benchtest'); "
              "from django.contrib.auth import get_user_model; "
              "from rollouts.models import Episode; "
              "print(get_user_model().objects.count(), Episode.objects.count())")
    env = {**os.environ, "DATABASE_URL": fresh_database_url}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "0"]


def test_a_database_url_naming_a_database_the_server_lacks_gets_it_created():
    """A bench given DATABASE_URL of a database not made yet creates it (then migrates it, as above), instead of
    dying on 'database ... does not exist'."""
    name = f"loupe_missing_{uuid.uuid4().hex[:10]}"
    url, params = _database_url(name)
    script = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'webapp.settings'); django.setup(); "
              "from bench.django_setup import _database_made; _database_made(); _database_made()")
    try:
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**os.environ, "DATABASE_URL": url},
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        with psycopg.connect(**params) as conn:
            assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
    finally:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
