"""Celery tasks: thin wrappers that take ids and call services."""
from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils.module_loading import import_string

from flywheel import episodes


@shared_task(acks_late=True, reject_on_worker_lost=False, max_retries=0)
def episode_run(episode_id: int) -> str:
    """Run one episode on the `rollouts` queue. A killed worker leaves it `interrupted` (see the sweep), to resume."""
    from flywheel import rollout_worker

    # flywheel does not import the human layer; settings name the supervisor it plugs in
    supervisor_factory = import_string(settings.LOUPE_SUPERVISOR_FACTORY) if settings.LOUPE_SUPERVISOR_FACTORY else None
    return rollout_worker.run(episode_id, supervisor_factory=supervisor_factory)


@shared_task
def episodes_sweep_interrupted() -> list[int]:
    """Beat task: mark episodes whose worker stopped heartbeating as interrupted."""
    return episodes.episodes_mark_interrupted(older_than_seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)


@shared_task
def training_runs_sweep_stalled() -> list[int]:
    """Beat task: start again the runs whose train worker stopped heartbeating."""
    from flywheel import training

    return training.runs_restart_stalled(older_than_seconds=settings.LOUPE_TRAIN_STALLED_SECONDS)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def training_run_execute(run_id: int) -> str:
    from flywheel import training

    return training.run_execute(run_id=run_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def snapshot_build(snapshot_id: int) -> str:
    """Write a snapshot on the `default` queue. A crash marks it failed with the reason, never half-written."""
    from flywheel import snapshots

    try:
        return snapshots.snapshot_build(snapshot_id=snapshot_id).status
    except Exception as exc:
        snapshots.snapshot_fail(snapshot_id=snapshot_id, error=f"The snapshot job crashed: {exc}")
        raise


@shared_task(acks_late=True, reject_on_worker_lost=True)
def episode_judge(episode_id: int, user_id: int | None = None) -> str:
    """Judge one finished episode on the `default` queue (flywheel/judge.py). Safe to run twice: a second run
    adds a newer judgement, the one routing reads."""
    from django.contrib.auth import get_user_model

    from flywheel import judge

    actor = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    return judge.judge_episode(episode_id=episode_id, actor=actor).verdict or "no verdict"


# --- flywheel cycles: one task a state (flywheel/cycles.py); all safe to run twice ----------------------
@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_gate(cycle_id: int) -> str:
    from flywheel import cycles

    return cycles.cycle_gate(cycle_id=cycle_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_snapshot(cycle_id: int) -> str:
    from flywheel import cycles

    return cycles.cycle_snapshot(cycle_id=cycle_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_train(cycle_id: int) -> str:
    from flywheel import cycles

    return cycles.cycle_train(cycle_id=cycle_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_run(cycle_id: int, run_id: int) -> str:
    """A cycle's training run (sent to the `train` queue in a chain with cycle_train: flywheel/cycles.py)."""
    from flywheel import cycles

    return cycles.cycle_run(cycle_id=cycle_id, run_id=run_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_evaluate(cycle_id: int) -> str:
    """On the `train` queue (settings CELERY_TASK_ROUTES): the trainer's eval beside the checkpoints."""
    from flywheel import cycles

    return cycles.cycle_evaluate(cycle_id=cycle_id)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def cycle_decide(cycle_id: int) -> str:
    from flywheel import cycles

    return cycles.cycle_decide(cycle_id=cycle_id)


@shared_task
def cycle_scheduled(project_id: int) -> int | None:
    """django-celery-beat's per-project PeriodicTask: start a cycle when none runs and there is new data."""
    from flywheel import cycles

    cycle = cycles.cycle_scheduled(project_id=project_id)
    return cycle.pk if cycle else None


@shared_task
def cycles_resume() -> list[int]:
    """Beat task: re-send the state task of cycles nobody works on (a killed worker, a lost message)."""
    from flywheel import cycles

    return cycles.cycles_resume()


@shared_task(acks_late=True, reject_on_worker_lost=True, autoretry_for=(OperationalError, InterfaceError),
             retry_backoff=True, max_retries=3)
def step_polish(step_id: int) -> str:
    """Polish one step's think-aloud words into a thought on the `default` queue (flywheel/polish.py). Safe to run
    twice: a step already polished from the same words, or edited by a person, is left as it is. A lost database
    connection is retried; a polisher that fails is stored on the step as why."""
    from flywheel import polish

    return polish.step_polish(step_id=step_id)
