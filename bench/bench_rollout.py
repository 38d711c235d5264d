"""Recording cost of rollouts: persisted steps per second of one rollout worker, and what storing a step
(PostgreSQL rows, the screenshot file, the event and its publish) costs as a share of the whole step.

Episodes run through the worker's own code (`rollouts.worker.run`: claim, the MiniWoB page in
Chromium, the policy, the supervisor-free rollout loop, `episodes.step_record`), in this process, on a
database of its own (`loupe_bench_rollout`). Two policies: the scripted solvers (no model time, so the
figure is the env + recording ceiling) and the untrained tiny local model (a real forward pass a step).
`LOUPE_BENCH_ROLLOUT_EPISODES` sets episodes per policy (default 20). Prints JSON.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")
# Playwright's sync API keeps an event loop on this thread; a rollout worker process allows sync ORM the same way
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("LOUPE_MEDIA_ROOT", tempfile.mkdtemp(prefix="loupe-bench-media-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

EPISODES = int(os.environ.get("LOUPE_BENCH_ROLLOUT_EPISODES", "20"))
TASK = "click-checkboxes"  # several steps an episode, so recording is measured on steps, not on resets


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 2)}


def run_policy(project, task, checkpoint, backend: str) -> dict:
    from training import deployments
    from rollouts import worker as rollout_worker
    from rollouts.models import Episode, Step

    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend=backend, reason="bench")
    record_ms: list[float] = []
    real_record = rollout_worker.record_step

    def timed_record(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real_record(*args, **kwargs)
        finally:
            record_ms.append((time.perf_counter() - started) * 1000)

    rollout_worker.record_step = timed_record
    try:
        warm = Episode.objects.create(project=project, task=task, seed=999, mode="autonomous")
        rollout_worker.run(warm.pk)  # browser start and model load are not measured
        record_ms.clear()
        batch = [Episode.objects.create(project=project, task=task, seed=seed, mode="autonomous")
                 for seed in range(EPISODES)]
        started = time.perf_counter()
        for episode in batch:
            rollout_worker.run(episode.pk)
        wall = time.perf_counter() - started
    finally:
        rollout_worker.record_step = real_record
    steps = list(Step.objects.filter(episode__in=batch).values_list("timings", flat=True))
    step_ms = [sum(float(t.get(k, 0.0)) for k in ("observe", "policy", "execute")) for t in steps]
    policy_ms = [float(t.get("policy", 0.0)) for t in steps]
    total_record = sum(record_ms)
    return {
        "episodes": len(batch), "steps": len(steps),
        "persisted_steps_per_s": round(len(steps) / wall, 2),
        "record": _summary(record_ms),
        "step_without_record": _summary(step_ms),
        "policy": _summary(policy_ms),
        "record_share": round(total_record / (total_record + sum(step_ms)), 3),
        "success_rate": round(sum(1 for e in Episode.objects.filter(pk__in=[e.pk for e in batch])
                                  if (e.env_reward or 0) > 0) / len(batch), 3),
    }


def main() -> None:
    from projects import services
    from rollouts.models import Checkpoint
    from rollouts.worker import _envs
    from trainer.model import save_tiny_untrained

    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "loupe_bench_rollout"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    project = services.project_create(name="Bench rollouts")
    task = services.task_create(project=project, actor=None, task_name=TASK, max_steps=8)
    scripted = Checkpoint.objects.create(project=project, name="scripted", uri="scripted:", base_model="scripted")
    tiny_dir = save_tiny_untrained(Path(tempfile.mkdtemp(prefix="loupe-bench-tiny-")) / "tiny")
    tiny = Checkpoint.objects.create(project=project, name="tiny-untrained", uri=str(tiny_dir))
    try:
        report = {"task": TASK, "scripted": run_policy(project, task, scripted, "scripted"),
                  "tiny_local": run_policy(project, task, tiny, "local")}
    finally:
        for env in _envs.values():
            env.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
