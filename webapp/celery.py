"""The Celery app. Queues: rollouts (agent episodes), audio (Whisper), train (trainer subprocess), default."""
import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("loupe")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "rollouts", "audio", "train")]
app.autodiscover_tasks()
