"""Celery tasks of snapshots. Registered under the names the flywheel app gave them."""
from __future__ import annotations

from celery import shared_task

from snapshots import build


@shared_task(name="flywheel.tasks.snapshot_build", acks_late=True, reject_on_worker_lost=True)
def snapshot_build(snapshot_id: int) -> str:
    """Write a snapshot on the `default` queue. A crash marks it failed with the reason, never half-written."""
    try:
        return build.snapshot_build(snapshot_id=snapshot_id).status
    except Exception as exc:
        build.snapshot_fail(snapshot_id=snapshot_id, error=f"The snapshot job crashed: {exc}")
        raise


@shared_task(name="snapshots.tasks.render_ahead", acks_late=True, reject_on_worker_lost=True)
def render_ahead(project_id: int) -> dict:
    """Render and store a project's rows ahead of its next freeze (snapshots/render_ahead.py), on `default`."""
    from snapshots.render_ahead import render_ahead as run

    return run(project_id)


@shared_task(name="snapshots.tasks.render_ahead_sweep", acks_late=True, reject_on_worker_lost=True)
def render_ahead_sweep() -> dict:
    """The beat's catch-up over every project: what changed since it was rendered, what a queued job missed."""
    from snapshots.render_ahead import render_ahead_sweep as run

    return {str(project_id): done for project_id, done in run().items()}
