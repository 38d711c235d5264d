"""Celery tasks of rollouts: thin wrappers that take ids and call services. Registered under the names the
flywheel app gave them (queues, beat and running workers know them by these)."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.utils.module_loading import import_string

from rollouts import episodes, worker


@shared_task(name="flywheel.tasks.episode_run", acks_late=True, reject_on_worker_lost=False, max_retries=0)
def episode_run(episode_id: int) -> str:
    """Run one episode on the `rollouts` queue. A killed worker leaves it `interrupted` (see the sweep), to resume."""
    # rollouts does not import the human layer; settings name the supervisor it plugs in
    supervisor_factory = import_string(settings.LOUPE_SUPERVISOR_FACTORY) if settings.LOUPE_SUPERVISOR_FACTORY else None
    return worker.run(episode_id, supervisor_factory=supervisor_factory)


@shared_task(name="flywheel.tasks.episodes_sweep_interrupted")
def episodes_sweep_interrupted() -> list[int]:
    """Beat task: mark episodes whose worker stopped heartbeating as interrupted."""
    return episodes.episodes_mark_interrupted(older_than_seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
