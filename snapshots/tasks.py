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
