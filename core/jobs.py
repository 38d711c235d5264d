"""Queue a Celery task by its registered name. A service queues work this way instead of importing its app's
``tasks`` module, which imports the services back; the task object is the registered one, so a test that
patches ``tasks.<name>.delay`` sees the call."""
from __future__ import annotations

import threading

from celery import current_app

# One thread at a time runs the apps' task discovery: two requests queueing their first job at once in a fresh web
# process (daphne runs each in its own thread) imported the tasks modules side by side, and importlib, to avoid a
# deadlock between their module locks, handed one thread a module half run, before its tasks were registered: a 500
# ("never registered") for 2 to 6 of 8 such first lookups.
_discovery = threading.Lock()


def job(name: str):
    """The registered task ``name`` (e.g. ``"flywheel.tasks.episode_run"``): ``.delay(...)``, ``.apply_async(...)``,
    ``.s(...)``."""
    try:
        return current_app.tasks[name]
    except KeyError:
        # A worker imports every app's tasks module at start; another process (web, a command, a test) the first
        # time it queues something: the app's autodiscovery, run once, by one thread while the others wait.
        with _discovery:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
        return current_app.tasks[name]
