"""Series for a project's dashboard: aggregates in SQL, one row per day (and checkpoint / person)."""
from __future__ import annotations

from django.db.models import Avg, Count, Q, Sum
from django.db.models.functions import TruncDate

from cycles import learned
from projects.models import Project
from rollouts.models import EpisodeStatus, Outcome
from rollouts.routing import routing_of
from snapshots.models import SnapshotStatus


def _finished(project: Project):
    return project.episodes.filter(status=EpisodeStatus.FINISHED, finished_at__isnull=False) \
        .annotate(day=TruncDate("finished_at"))


def _success_q(project: Project) -> Q:
    return Q(outcome=Outcome.SUCCESS) | Q(env_reward__gte=routing_of(project)["reward_threshold"])


def dashboard_series(*, project: Project) -> dict:
    finished = _finished(project)
    success = [
        {"checkpoint": row["checkpoint__name"] or "(none)", "day": row["day"].isoformat(), "episodes": row["episodes"],
         "success_rate": round(row["successes"] / row["episodes"], 4)}
        for row in finished.values("checkpoint__name", "day")
        .annotate(episodes=Count("id"), successes=Count("id", filter=_success_q(project)))
        .order_by("day", "checkpoint__name")
    ]
    interventions = [
        {"day": row["day"].isoformat(), "episodes": row["episodes"], "per_episode": round(row["mean"] or 0.0, 3)}
        for row in finished.values("day").annotate(episodes=Count("id"), mean=Avg("n_interventions")).order_by("day")
    ]
    void_rate = [
        {"day": row["day"].isoformat(), "steps": row["steps"] or 0,
         "rate": round((row["void"] or 0) / row["steps"], 4) if row["steps"] else 0.0}
        for row in finished.values("day").annotate(steps=Sum("n_steps"), void=Sum("n_void")).order_by("day")
    ]
    throughput = [
        {"username": row["created_by__username"], "day": row["day"].isoformat(), "episodes": row["episodes"],
         "steps": row["steps"] or 0}
        for row in finished.filter(created_by__isnull=False, mode="supervised")
        .values("created_by__username", "day").annotate(episodes=Count("id"), steps=Sum("n_steps"))
        .order_by("day", "created_by__username")
    ]
    growth = [
        {"created_at": s.created_at.isoformat(), "kind": s.kind, "rows": s.rows, "name": s.name}
        for s in project.snapshots.filter(status=SnapshotStatus.READY).order_by("created_at")
    ]
    return {"success_by_checkpoint": success, "interventions": interventions, "void_rate": void_rate,
            "annotator_throughput": throughput, "dataset_growth": growth,
            "corrections_learned": learned.annotator_learned(project=project)}
