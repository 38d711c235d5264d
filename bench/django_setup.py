"""Django for the benches that work in the configured database (DATABASE_URL, else the embedded one): its
settings, then every migration applied, so a bench runs on a fresh database as on one `make run` migrated.
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
    call_command("migrate", interactive=False, verbosity=0)
