"""Run by tests/core/test_jobs.py in a fresh process: eight threads look up tasks by name at the same moment, the
first lookups of the process (a web process's first concurrent requests that queue work). Prints how many failed."""
import os
import threading

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

import webapp.asgi  # noqa: E402,F401 - what daphne imports

from core.jobs import job  # noqa: E402

NAMES = ["flywheel.tasks.episode_run", "flywheel.tasks.cycle_run"] * 4
barrier = threading.Barrier(len(NAMES))
errors: list[str] = []


def lookup(name: str) -> None:
    barrier.wait()
    try:
        assert job(name).name == name
    except Exception as exc:  # noqa: BLE001 - counted and shown by the test
        errors.append(repr(exc))


threads = [threading.Thread(target=lookup, args=(name,)) for name in NAMES]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(errors), errors[:1])
