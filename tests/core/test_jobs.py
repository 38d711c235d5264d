"""Tasks are queued by their registered names (core/jobs.py): every name that the settings route to a queue or that
beat sends resolves to the task of that name (autodiscovery runs at the first lookup where no worker ran it).
The judge's and the polisher's tasks live in annotation/tasks.py under their flywheel names: the audio queue's
``annotation.tasks.*`` route does not take them."""
from django.conf import settings

from core.jobs import job


def test_every_routed_and_scheduled_task_name_resolves_to_its_task():
    routed = {name for name in settings.CELERY_TASK_ROUTES if "*" not in name}
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    queued = {"flywheel.tasks.cycle_scheduled", "flywheel.tasks.episode_judge", "flywheel.tasks.step_polish"}
    for name in sorted(routed | scheduled | queued):
        assert job(name).name == name
