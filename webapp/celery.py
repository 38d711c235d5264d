"""The Celery app. Queues: live (supervised episodes: people's lane), rollouts (autonomous episodes), audio
(Whisper), train (trainer subprocess), default."""
import os
import warnings

from celery import Celery
from celery.exceptions import SecurityWarning
from celery.signals import worker_process_init
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

if os.geteuid() == 0 and os.environ.get("LOUPE_PRODUCTION", "") in ("", "0"):
    # A development machine run as root (containers, CI): `make run` says so once; Celery's nine-line warning from
    # every worker would bury the terminal. In production (LOUPE_PRODUCTION=1) the warning stays; the Docker image
    # runs as an unprivileged user anyway.
    warnings.filterwarnings("ignore", category=SecurityWarning)

app = Celery("loupe")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "live", "rollouts", "audio", "train")]
app.autodiscover_tasks()


@worker_process_init.connect
def _allow_sync_orm_beside_playwright(**_):
    """Rollout workers drive Chromium with Playwright's sync API, which keeps an asyncio loop on the
    worker's thread; Django then takes every ORM call for one made from async code. Worker processes
    run tasks synchronously, one at a time, so the guard does not apply to them (it still does in daphne)."""
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
