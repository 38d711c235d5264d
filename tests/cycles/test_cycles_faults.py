"""Faults during a cycle: a worker killed with SIGKILL mid-state, and Redis restarted empty mid-cycle. Its own
module, so no module-wide worker competes with the ones these tests start and kill."""
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cycles import cycle_settings
from cycles import cycles
from snapshots import buckets
from cycles.models import Cycle, Evaluation
from training.models import TrainingRun
from cycles.tasks import cycles_resume
from tests.factories import (PASSWORD, make_finished_episode, make_member, make_project, make_task, make_tiny_checkpoint,
                             make_user)
from tests.stack import (ProcessStack, free_port, stack_env, start_daphne, start_together, start_worker, trainer_run,
                         wait_for)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

TERMINAL = ("deployed", "rejected", "skipped", "failed")


@pytest.fixture
def project(tmp_path):
    project = make_project()
    manager = make_user("cyclemanager")
    make_member(project, manager, "manager")
    train = make_task(project, "click-test", seed_start=0, seed_end=999, max_steps=2)
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=1)
    make_tiny_checkpoint(project, tmp_path / "untrained")
    buckets.routing_set(project=project, actor=manager, reward_threshold=0.5)
    for _ in range(3):
        make_finished_episode(project, train, steps=[{}], mode="supervised", reward=1.0)
    cycle_settings.settings_set(project=project, actor=manager, min_new_rows=1, eval_seeds=3, margin=0.05,
                        recipe=[{"algorithm": "sft", "max_steps": 10, "lr": 0.003}])
    return project


def trainer_json(*args: str) -> dict:
    """Run the trainer CLI here, as the worker does; its final JSON line."""
    return json.loads(trainer_run(*args)[1].strip().splitlines()[-1])


def resume_until(cycle_id: int, predicate, timeout: float, what: str):
    """Run the beat's resume sweep (in this process, as beat would) until ``predicate(cycle)``."""
    def check():
        cycles_resume.apply()
        cycle = Cycle.objects.get(pk=cycle_id)
        return cycle if predicate(cycle) else None
    return wait_for(check, timeout, interval=1, what=what)


@pytest.mark.parametrize("state", [pytest.param("train", marks=pytest.mark.flywheel), "evaluate"])  # train: 2 min
def test_a_worker_killed_mid_state_resumes_to_the_same_result(project, tmp_path, state):
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_CHECKPOINT_DIR=tmp_path / "checkpoints")
    try:
        victim = start_worker(stack, tmp_path, env, queues="default,train", name="victim")
        cycle = cycles.cycle_start(project=project, actor=None, trigger="command")
        if state == "train":  # mid-training: the run has reported progress
            wait_for(lambda: TrainingRun.objects.filter(config__cycle=cycle.pk, status="running")
                     .exclude(metrics=[]).exists(), 180, interval=0.2, what="training progress")
        else:  # mid-evaluation: the candidate is measured, the deployed checkpoint not yet
            wait_for(lambda: Evaluation.objects.filter(cycle=cycle, role="candidate").exists(), 300, interval=0.1,
                     what="the candidate's evaluation")
        os.killpg(victim.pid, signal.SIGKILL)
        killed = Cycle.objects.get(pk=cycle.pk)
        assert killed.state == state and killed.worker  # the lease of a dead worker
        kept = list(Evaluation.objects.filter(cycle=cycle).values_list("pk", "success_rate"))
        start_worker(stack, tmp_path, env, queues="default,train", name="rescuer")
        ended = resume_until(cycle.pk, lambda c: c.state in TERMINAL, 600, "the resumed cycle to end")
    finally:
        stack.stop()
    assert ended.state in ("deployed", "rejected"), (ended.error, ended.log_tail[-2000:])
    assert TrainingRun.objects.filter(config__cycle=cycle.pk).count() == 1
    evaluations = {e.role: e for e in Evaluation.objects.filter(cycle=ended)}
    assert set(evaluations) == {"candidate", "deployed"}
    if state == "evaluate":  # the stored measurement is kept, not taken twice
        assert (evaluations["candidate"].pk, evaluations["candidate"].success_rate) in kept
    # the same result as running the same commands uninterrupted: training and evaluation are deterministic.
    # The commands run side by side; training is re-run only where it was the interrupted state.
    run = TrainingRun.objects.get(config__cycle=cycle.pk)
    commands = {role: ("eval", "--init", evaluation.checkpoint.uri, "--out", str(tmp_path / f"eval-{role}"),
                       "--tasks", "click-test", "--seeds", "100000-100002", "--max-episode-steps", "1")
                for role, evaluation in evaluations.items()}
    if state == "train":
        from django.core.files.storage import default_storage

        commands["train"] = ("sft", "--data", default_storage.path(ended.snapshots.get().file), "--init",
                             run.init_checkpoint.uri, "--out", str(tmp_path / "again"), "--max-steps", "10", "--lr",
                             "0.003", "--max-epochs", str(run.config["stages"][0]["max_epochs"]))
    with ThreadPoolExecutor(len(commands)) as pool:
        direct = dict(zip(commands, pool.map(lambda argv: trainer_json(*argv), commands.values())))
    if state == "train":
        assert direct["train"]["metrics"]["final_loss"] == pytest.approx(run.checkpoint.metrics["final_loss"], rel=1e-4)
    for role, evaluation in evaluations.items():
        assert direct[role]["metrics"]["overall"]["success_rate"] == evaluation.success_rate, role
    assert ended.decision_data["decision"]["candidate"]["success_rate"] == evaluations["candidate"].success_rate


def test_a_cycle_carries_on_when_redis_restarts_empty(project, tmp_path):
    from demo.simulated_annotators import Api

    port = free_port()
    redis_argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
    stack = ProcessStack([], [])
    redis = subprocess.Popen(redis_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = stack_env(REDIS_URL=f"redis://127.0.0.1:{port}/0", LOUPE_CHECKPOINT_DIR=tmp_path / "checkpoints")
    try:
        wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip()
                 == b"PONG", 10, what="redis")
        base, _ = start_together(lambda: start_daphne(stack, tmp_path, env),
                                 lambda: start_worker(stack, tmp_path, env, queues="default,train", name="worker"))
        stack.start("beat", [sys.executable, "-m", "celery", "-A", "webapp", "beat", "--loglevel", "INFO",
                             "-s", str(tmp_path / "beat-schedule")], env, tmp_path)
        manager = Api(base, "cyclemanager", PASSWORD)
        cycle_id = manager.call("POST", f"/api/v1/projects/{project.pk}/cycles/")["id"]
        wait_for(lambda: TrainingRun.objects.filter(config__cycle=cycle_id, status="running").exclude(metrics=[])
                 .exists(), 180, interval=0.2, what="training progress")
        redis.kill()  # SIGKILL, and nothing was saved: every queued message is gone
        redis.wait()
        time.sleep(2)
        redis = subprocess.Popen(redis_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ended():
            cycle = Cycle.objects.get(pk=cycle_id)
            return cycle if cycle.state in TERMINAL else None
        cycle = wait_for(ended, 600, interval=1, what=f"the cycle to end after the restart\n{stack.tail()}")
    finally:
        stack.stop()
        redis.kill()
        redis.wait()
    assert cycle.state in ("deployed", "rejected"), (cycle.error, cycle.log_tail[-2000:])
    assert set(Evaluation.objects.filter(cycle=cycle).values_list("role", flat=True)) == {"candidate", "deployed"}
    assert TrainingRun.objects.get(config__cycle=cycle_id).status == "succeeded"
