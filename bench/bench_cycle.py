"""One flywheel cycle at demo scale, on this machine: wall time split by state (target: under 10 minutes in
all), and the time from a promotion to the first episode that runs on the new checkpoint (target: under
10 seconds for the `local` backend).

Demo scale is what `make flywheel` does in a cycle: 24 finished episodes routed to SFT (acted here by the
scripted solvers through the rollout worker, standing in for the annotators), the demo recipe (SFT 200 steps,
then DPO when there are correction pairs), and the candidate and the deployed checkpoint each evaluated on
2 tasks x 10 held-out seeds. Real Celery workers as `make run` starts them (rollouts + default, and train),
on a database of its own (`loupe_bench_cycle`). Prints JSON.

`LOUPE_BENCH_CYCLE_EPISODES`, `LOUPE_BENCH_CYCLE_STEPS`, `LOUPE_BENCH_CYCLE_EVAL_SEEDS` scale it.
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
os.environ.setdefault("LOUPE_CHANNEL_PREFIX", f"benchcycle{os.getpid()}")
os.environ.setdefault("LOUPE_MEDIA_ROOT", tempfile.mkdtemp(prefix="loupe-bench-media-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

EPISODES = int(os.environ.get("LOUPE_BENCH_CYCLE_EPISODES", "24"))
SFT_STEPS = int(os.environ.get("LOUPE_BENCH_CYCLE_STEPS", "200"))
EVAL_SEEDS = int(os.environ.get("LOUPE_BENCH_CYCLE_EVAL_SEEDS", "10"))
TASKS = ("click-test", "focus-text")
PROMOTIONS = 5


def wait(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"no {what} within {timeout:.0f} s")


def promotion_latency(project, task, checkpoints, user) -> list[float]:
    """Promote, then start an episode as a person would; seconds until its first step ran on the new checkpoint."""
    from training import deployments
    from rollouts import episodes
    from rollouts.models import Step

    out = []
    for i in range(PROMOTIONS):
        checkpoint = checkpoints[i % len(checkpoints)]
        deployment = deployments.deployment_promote(project=project, checkpoint=checkpoint, reason="bench promotion")
        episode = episodes.episodes_start(project=project, task=task, seeds=[50_000 + i], mode="autonomous",
                                          actor=user)[0]
        step = wait(lambda: Step.objects.filter(episode=episode).order_by("index").first(), 120, "first step")
        assert step.checkpoint_id == checkpoint.pk, "the episode ran on another checkpoint"
        out.append((step.created_at - deployment.activated_at).total_seconds())
        wait(lambda: episode.__class__.objects.get(pk=episode.pk).status in ("finished", "failed"), 120, "the episode")
    return out


def main() -> None:
    from django.contrib.auth import get_user_model

    from cycles import cycle_settings
    from cycles import cycles
    from snapshots import buckets
    from training import deployments
    from rollouts import episodes
    from projects import services
    from cycles.models import CYCLE_TERMINAL, Cycle
    from rollouts.models import Checkpoint, Episode
    from projects.models import TaskSpec
    from tests.stack import ProcessStack, stack_env, start_worker
    from trainer.model import save_tiny_untrained

    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "loupe_bench_cycle"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    work = Path(tempfile.mkdtemp(prefix="loupe-bench-cycle-"))
    user = get_user_model().objects.create_user(username="bench-manager", password="x" * 12)
    project = services.project_create(name="Bench cycle", owner=user)
    train = {name: TaskSpec.objects.create(project=project, task_name=name, seed_start=0, seed_end=99_999, max_steps=3)
             for name in TASKS}
    for name in TASKS:
        TaskSpec.objects.create(project=project, task_name=name, split="eval", seed_start=100_000, seed_end=100_099,
                                max_steps=2)
    buckets.routing_set(project=project, actor=user, reward_threshold=0.5)
    cycle_settings.settings_set(project=project, actor=user, min_new_rows=1, eval_seeds=EVAL_SEEDS, margin=0.05,
                        recipe=[{"algorithm": "sft", "max_steps": SFT_STEPS, "lr": 0.003},
                                {"algorithm": "dpo", "max_steps": 10}])
    oracle = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    untrained = deployments.checkpoint_register(project=project, name="untrained",
                                             uri=str(save_tiny_untrained(work / "untrained")))

    stack = ProcessStack([], [])
    try:
        env = stack_env(LOUPE_CHECKPOINT_DIR=work / "checkpoints", LOUPE_WORKER_LOG_LEVEL="WARNING")
        start_worker(stack, work, env, queues="live,rollouts,default", name="live", concurrency=2)
        start_worker(stack, work, env, queues="train", name="train", concurrency=1)

        # the routed data (the scripted solvers stand in for the annotators)
        deployments.deployment_promote(project=project, checkpoint=oracle, backend="scripted", reason="bench data")
        started = time.monotonic()
        ids = []
        for i in range(EPISODES):
            ids += [e.pk for e in episodes.episodes_start(project=project, task=train[TASKS[i % len(TASKS)]],
                                                          seeds=[i], mode="autonomous", actor=user)]
        wait(lambda: Episode.objects.filter(pk__in=ids, status__in=["finished", "failed"]).count() == len(ids), 600,
             "the data episodes", interval=0.5)
        data_seconds = time.monotonic() - started
        deployments.deployment_promote(project=project, checkpoint=untrained, reason="bench: the deployed policy")

        started = time.monotonic()
        cycle = cycles.cycle_start(project=project, actor=user, trigger="command")
        cycle = wait(lambda: Cycle.objects.filter(pk=cycle.pk, state__in=CYCLE_TERMINAL).first(), 3600, "cycle end",
                     interval=0.5)
        wall = time.monotonic() - started
        evaluations = {e.role: e for e in cycle.evaluations.all()}
        report = {
            "episodes": EPISODES, "data_seconds": round(data_seconds, 1), "sft_steps": SFT_STEPS,
            "eval_episodes_per_checkpoint": EVAL_SEEDS * len(TASKS),
            "cycle": {"state": cycle.state, "decision": cycle.decision, "error": cycle.error[:300],
                      "wall_s": round(wall, 1),
                      "by_state_s": {state: t.get("seconds") for state, t in cycle.timings.items()},
                      "target_s": 600, "meets_target": wall < 600},
            "success": {role: e.success_rate for role, e in evaluations.items()},
        }
        candidates = [untrained] + ([cycle.candidate] if cycle.candidate else [])
        if len(candidates) == 2:
            latencies = promotion_latency(project, train[TASKS[0]], candidates[::-1], user)
            report["promotion_to_first_episode_s"] = {
                "median": round(statistics.median(latencies), 2), "max": round(max(latencies), 2),
                "samples": [round(s, 2) for s in latencies], "target_s": 10, "meets_target": max(latencies) < 10,
                "backend": "local"}
    finally:
        stack.stop()
        connection.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
