"""Celery tasks of training: thin wrappers that take ids and call services. Registered under the names the
flywheel app gave them (queues, beat and running workers know them by these)."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings

from training import runs


@shared_task(name="flywheel.tasks.training_runs_sweep_stalled")
def training_runs_sweep_stalled() -> list[int]:
    """Beat task: start again the runs whose train worker stopped heartbeating."""
    return runs.runs_restart_stalled(older_than_seconds=settings.LOUPE_TRAIN_STALLED_SECONDS)


@shared_task(name="flywheel.tasks.training_run_execute", acks_late=True, reject_on_worker_lost=True)
def training_run_execute(run_id: int) -> str:
    return runs.run_execute(run_id=run_id)
