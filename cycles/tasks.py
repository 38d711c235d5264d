"""Celery tasks of cycles: one task a state (cycles/cycles.py); all safe to run twice. Registered under the names
the flywheel app gave them (queues, beat's per-project schedules and running workers know them by these)."""
from __future__ import annotations

from celery import shared_task

from cycles import cycles, decide


@shared_task(name="flywheel.tasks.cycle_gate", acks_late=True, reject_on_worker_lost=True)
def cycle_gate(cycle_id: int) -> str:
    return cycles.cycle_gate(cycle_id=cycle_id)


@shared_task(name="flywheel.tasks.cycle_snapshot", acks_late=True, reject_on_worker_lost=True)
def cycle_snapshot(cycle_id: int) -> str:
    return cycles.cycle_snapshot(cycle_id=cycle_id)


@shared_task(name="flywheel.tasks.cycle_train", acks_late=True, reject_on_worker_lost=True)
def cycle_train(cycle_id: int) -> str:
    return cycles.cycle_train(cycle_id=cycle_id)


@shared_task(name="flywheel.tasks.cycle_run", acks_late=True, reject_on_worker_lost=True)
def cycle_run(cycle_id: int, run_id: int) -> str:
    """A cycle's training run (sent to the `train` queue in a chain with cycle_train: cycles/cycles.py)."""
    return cycles.cycle_run(cycle_id=cycle_id, run_id=run_id)


@shared_task(name="flywheel.tasks.cycle_evaluate", acks_late=True, reject_on_worker_lost=True)
def cycle_evaluate(cycle_id: int) -> str:
    """On the `train` queue (settings CELERY_TASK_ROUTES): the trainer's eval beside the checkpoints."""
    return cycles.cycle_evaluate(cycle_id=cycle_id)


@shared_task(name="flywheel.tasks.cycle_decide", acks_late=True, reject_on_worker_lost=True)
def cycle_decide(cycle_id: int) -> str:
    return decide.cycle_decide(cycle_id=cycle_id)


@shared_task(name="flywheel.tasks.cycle_scheduled")
def cycle_scheduled(project_id: int) -> int | None:
    """django-celery-beat's per-project PeriodicTask: start a cycle when none runs and there is new data."""
    cycle = cycles.cycle_scheduled(project_id=project_id)
    return cycle.pk if cycle else None


@shared_task(name="flywheel.tasks.cycles_resume")
def cycles_resume() -> list[int]:
    """Beat task: re-send the state task of cycles nobody works on (a killed worker, a lost message)."""
    return cycles.cycles_resume()
