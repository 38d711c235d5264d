"""Queue a Celery task by its registered name. A service queues work this way instead of importing its app's
``tasks`` module, which imports the services back; the task object is the registered one, so a test that
patches ``tasks.<name>.delay`` sees the call."""
from __future__ import annotations

from celery import current_app


def job(name: str):
    """The registered task ``name`` (e.g. ``"flywheel.tasks.episode_run"``): ``.delay(...)``, ``.apply_async(...)``,
    ``.s(...)``."""
    try:
        return current_app.tasks[name]
    except KeyError:
        # A worker imports every app's tasks module at start; another process (web, a command, a test) the first
        # time it queues something: the app's autodiscovery, run once.
        current_app.loader.import_default_modules()
        return current_app.tasks[name]
