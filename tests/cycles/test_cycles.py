"""Flywheel cycles (cycles/cycles.py): settings, the one-at-a-time lock, the gate, the decision, deployment
refusals and rollback, the schedule, and whole cycles on a real Celery worker with the real trainer."""
import json
import threading

import pytest
from rest_framework.test import APIClient

from cycles import cycle_settings
from cycles import cycles
from cycles import decide
from snapshots import buckets
from training import deployments
from rollouts import episodes
from cycles.models import Cycle, CycleState, Evaluation
from rollouts.models import Deployment
from training.models import TrainingRun
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_tiny_checkpoint, make_user
from tests.stack import stack_env, start_worker, trainer_run, trainer_start, wait_for, worker_quiet
from core.errors import ApplicationError
from core.models import AuditEntry

pytestmark = pytest.mark.django_db
FAST_RECIPE = [{"algorithm": "sft", "max_steps": 2}]


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def flywheel_project(tmp_path):
    """A click-test project: train seeds 0-999, held-out eval seeds 100000+, an untrained tiny checkpoint deployed,
    successes routed to SFT, and a manager, an annotator and an outsider."""
    project = make_project()
    users = {"manager": make_user(), "annotator": make_user(), "outsider": make_user()}
    make_member(project, users["manager"], "manager")
    make_member(project, users["annotator"], "annotator")
    make_member(make_project(), users["outsider"], "admin")
    train = make_task(project, "click-test", seed_start=0, seed_end=999, max_steps=3)
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=2)
    untrained = make_tiny_checkpoint(project, tmp_path / "untrained")
    buckets.routing_set(project=project, actor=users["manager"], reward_threshold=0.5)
    cycle_settings.settings_set(project=project, actor=users["manager"], min_new_rows=1, recipe=FAST_RECIPE, eval_seeds=4,
                        margin=0.05)
    return {"project": project, "train": train, "untrained": untrained, **users}


def sft_episode(fp, reward=1.0):
    return make_finished_episode(fp["project"], fp["train"], steps=[{}], mode="supervised", reward=reward)


# --- settings ------------------------------------------------------------------------------------------
def test_cycle_settings_are_validated_field_by_field(flywheel_project):
    fp = flywheel_project
    url = f"/api/v1/projects/{fp['project'].pk}/cycle-settings"
    manager = client_for(fp["manager"])
    for body, field in [({"margin": 2}, "margin"), ({"recipe": []}, "recipe"),
                        ({"recipe": [{"algorithm": "sft"}, {"algorithm": "sft"}]}, "recipe"),
                        ({"recipe": [{"algorithm": "ppo"}]}, "recipe"), ({"eval_tasks": [fp["train"].pk]}, "eval_tasks"),
                        ({"min_new_rows": -1}, "min_new_rows"), ({"cadence_minutes": -5}, "cadence_minutes"),
                        ({"backend": "openai"}, "base_checkpoint"), ({"colour": "red"}, "colour"),
                        ({"recipe": [{"algorithm": "rl", "group_size": 1}]}, "recipe"),
                        ({"recipe": [{"algorithm": "sft", "group_size": 4}]}, "recipe"),
                        ({"recipe": [{"algorithm": "rl", "max_new_tokens": 5000}]}, "recipe")]:
        response = manager.patch(url, body, format="json")
        assert response.status_code == 400, (body, response.content)
        assert field in response.json()["errors"], (body, response.json())
    before = manager.get(url).json()
    assert before["margin"] == 0.05 and before["recipe"] == [{"algorithm": "sft", "max_steps": 2, "max_epochs": 5}]

    changed = manager.patch(url, {"margin": 0.1, "auto_deploy": False, "recipe": [
        {"algorithm": "sft", "max_steps": 5, "lr": 0.003}, {"algorithm": "dpo", "max_steps": 3}]}, format="json")
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert body["margin"] == 0.1 and body["auto_deploy"] is False and len(body["recipe"]) == 2
    assert body["eval_plan"] == [{"env": "miniwob", "seeds": "100000-100003", "max_steps": 2, "tasks": ["click-test"]}]
    assert AuditEntry.objects.filter(action="cycle.settings", project_id=fp["project"].pk).count() >= 2
    grpo = manager.patch(url, {"recipe": [{"algorithm": "rl", "max_steps": 4, "group_size": 8, "max_new_tokens": 256}]},
                         format="json")
    assert grpo.status_code == 200 and grpo.json()["recipe"] == [
        {"algorithm": "rl", "max_steps": 4, "group_size": 8, "max_new_tokens": 256}], grpo.content


def test_cadence_creates_and_pauses_the_projects_beat_schedule(flywheel_project):
    from django_celery_beat.models import PeriodicTask

    fp = flywheel_project
    url = f"/api/v1/projects/{fp['project'].pk}/cycle-settings"
    manager = client_for(fp["manager"])
    body = manager.patch(url, {"cadence_minutes": 90}, format="json").json()
    assert body["cadence_minutes"] == 90
    task = PeriodicTask.objects.get(name=f"flywheel cycle: project {fp['project'].pk}")
    assert task.enabled and task.task == "flywheel.tasks.cycle_scheduled" and json.loads(task.args) == [fp["project"].pk]
    assert (task.interval.every, task.interval.period) == (90, "minutes")
    task.interval = type(task.interval).objects.get_or_create(every=2, period="hours")[0]  # edited in the admin
    task.save()
    assert manager.get(url).json()["cadence_minutes"] == 120
    assert manager.patch(url, {"cadence_minutes": 0}, format="json").json()["cadence_minutes"] == 0
    assert not PeriodicTask.objects.get(pk=task.pk).enabled


def test_the_schedule_starts_no_cycle_without_new_rows(flywheel_project, django_capture_on_commit_callbacks):
    fp = flywheel_project
    assert cycles.cycle_scheduled(project_id=fp["project"].pk) is None
    assert not Cycle.objects.exists()
    sft_episode(fp)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        cycle = cycles.cycle_scheduled(project_id=fp["project"].pk)
    assert cycle.trigger == "schedule" and cycle.state == CycleState.GATE and len(callbacks) == 1


def test_flywheel_cycle_command_starts_one_cycle_and_says_why_when_it_cannot(flywheel_project, capsys,
                                                                           django_capture_on_commit_callbacks):
    from django.core.management import CommandError, call_command

    fp = flywheel_project
    sft_episode(fp)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        call_command("flywheel_cycle", fp["project"].slug)
    cycle = Cycle.objects.get(project=fp["project"])
    assert cycle.trigger == "command" and len(callbacks) == 1
    assert f"Cycle 1 of {fp['project'].name} started" in capsys.readouterr().out
    with pytest.raises(CommandError, match="one cycle at a time"):
        call_command("flywheel_cycle", str(fp["project"].pk))
    with pytest.raises(CommandError, match="No project 'nope'"):
        call_command("flywheel_cycle", "nope")


# --- permissions -----------------------------------------------------------------------------------------
def test_only_managers_run_approve_configure_and_roll_back(flywheel_project, django_capture_on_commit_callbacks):
    fp = flywheel_project
    pid = fp["project"].pk
    sft_episode(fp)
    with django_capture_on_commit_callbacks(execute=False):
        cycle = cycles.cycle_start(project=fp["project"], actor=fp["manager"])
    old = Deployment.objects.get(project=fp["project"], active=True)
    writes = [("post", f"/api/v1/projects/{pid}/cycles/", None),
              ("post", f"/api/v1/cycles/{cycle.pk}/approve", None),
              ("post", f"/api/v1/cycles/{cycle.pk}/reject", {}),
              ("patch", f"/api/v1/projects/{pid}/cycle-settings", {"margin": 0.2}),
              ("post", f"/api/v1/projects/{pid}/deployments/{old.pk}/rollback", None)]
    reads = [f"/api/v1/projects/{pid}/cycles/", f"/api/v1/cycles/{cycle.pk}/", f"/api/v1/projects/{pid}/cycle-settings"]
    annotator, outsider = client_for(fp["annotator"]), client_for(fp["outsider"])
    for method, url, body in writes:
        response = getattr(annotator, method)(url, body, format="json")
        assert response.status_code == 403 and "manager" in response.json()["detail"], (url, response.content)
        assert getattr(outsider, method)(url, body, format="json").status_code == 404, url
    for url in reads:
        assert annotator.get(url).status_code == 200, url
        assert outsider.get(url).status_code == 404, url
    assert cycle_settings.settings_of(fp["project"])["margin"] == 0.05


# --- one cycle at a time --------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_two_triggers_at_once_make_one_cycle(flywheel_project, monkeypatch):
    from django.db import connection

    from cycles import tasks as cycle_tasks

    fp = flywheel_project
    sft_episode(fp)
    sent = []
    monkeypatch.setattr(cycle_tasks.cycle_gate, "delay", lambda pk: sent.append(pk))  # no worker in this test
    barrier, outcomes = threading.Barrier(4), []

    def trigger():
        try:
            barrier.wait()
            outcomes.append(cycles.cycle_start(project=fp["project"], actor=fp["manager"]).pk)
        except ApplicationError as exc:
            outcomes.append(exc.status)
        finally:
            connection.close()

    threads = [threading.Thread(target=trigger) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    created = Cycle.objects.filter(project=fp["project"])
    assert created.count() == 1 and outcomes.count(409) == 3, outcomes
    assert sent == [created.get().pk]
    response = client_for(fp["manager"]).post(f"/api/v1/projects/{fp['project'].pk}/cycles/")
    assert response.status_code == 409 and "one cycle at a time" in response.json()["detail"]


def test_a_cycle_needs_eval_tasks_whose_seeds_no_training_uses(flywheel_project):
    fp = flywheel_project
    fp["project"].tasks.filter(split="eval").update(seed_start=900, seed_end=1100)
    with pytest.raises(ApplicationError, match="overlap the seeds 0-999"):
        cycles.cycle_start(project=fp["project"], actor=fp["manager"])
    fp["project"].tasks.filter(split="eval").delete()
    response = client_for(fp["manager"]).post(f"/api/v1/projects/{fp['project'].pk}/cycles/")
    assert response.status_code == 409 and "no eval-split task" in response.json()["detail"]


# --- gate --------------------------------------------------------------------------------------------------
def test_a_cycle_is_refused_while_no_trained_checkpoint_is_deployed_saying_why(flywheel_project):
    """Issue 34: with the scripted baseline serving (the cold start still training) a cycle would train an untrained
    model on a few rows and lose to the baseline with no word of why: it is refused, naming the cold start."""
    from training import runs
    from rollouts.models import Checkpoint

    fp = flywheel_project
    sft_episode(fp)
    baseline = Checkpoint.objects.create(project=fp["project"], name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=fp["project"], checkpoint=baseline, backend="scripted")
    run = TrainingRun.objects.create(project=fp["project"], algorithm="sft",
                                     config={"stages": [{"algorithm": runs.COLDSTART}], "deploy_as": "v0"})
    response = client_for(fp["manager"]).post(f"/api/v1/projects/{fp['project'].pk}/cycles/")
    assert response.status_code == 409
    assert response.json()["detail"] == (
        "No trained checkpoint is deployed to improve: the project serves scripted-baseline. A cycle trains from the "
        f"deployed checkpoint on what people corrected. The cold start's v0 (training run #{run.pk}, queued; its "
        "progress is on the Runs page) deploys itself when it finishes: start the cycle then.")
    assert not Cycle.objects.filter(project=fp["project"]).exists()
    deployments.deployment_promote(project=fp["project"], checkpoint=fp["untrained"], reason="a checkpoint again")
    assert cycles.cycle_start(project=fp["project"], actor=fp["manager"]).iteration == 1


def test_gate_skips_with_the_counts_when_new_rows_are_too_few(flywheel_project, django_capture_on_commit_callbacks):
    fp = flywheel_project
    cycle_settings.settings_set(project=fp["project"], actor=fp["manager"], min_new_rows=3)
    sft_episode(fp)
    sft_episode(fp, reward=0.0)  # a failure is a CT row, not in the SFT recipe
    make_finished_episode(fp["project"], fp["project"].tasks.get(split="eval"), steps=[{}], reward=1.0)  # eval split
    with django_capture_on_commit_callbacks(execute=False):
        cycle = cycles.cycle_start(project=fp["project"], actor=fp["manager"])
    assert cycles.cycle_gate(cycle_id=cycle.pk) == CycleState.SKIPPED
    assert cycles.cycle_gate(cycle_id=cycle.pk) == "moved on"  # a redelivered task changes nothing
    cycle.refresh_from_db()
    assert cycle.state == CycleState.SKIPPED
    assert cycle.decision == "skipped: 1 new rows since the last cycle, 3 needed (sft)"
    assert cycle.decision_data["gate"]["buckets"] == {"sft": {"rows": 1, "new_rows": 1}}
    assert set(cycle.timings) == {"gate"} and cycle.timings["gate"]["seconds"] >= 0


def test_snapshot_and_train_skip_a_recipe_bucket_whose_episodes_make_no_rows(flywheel_project,
                                                                         django_capture_on_commit_callbacks):
    fp = flywheel_project
    cycle_settings.settings_set(project=fp["project"], actor=fp["manager"],
                        recipe=[{"algorithm": "sft", "max_steps": 5}, {"algorithm": "dpo", "max_steps": 5}])
    # a successful episode of void turns only is in the SFT bucket but makes no SFT row; a real correction makes a
    # DPO pair (a correction equal to the proposal is in no bucket at all: tests/snapshots/test_datasets.py)
    make_finished_episode(fp["project"], fp["train"], mode="supervised", reward=1.0, steps=[{"action": None}])
    make_finished_episode(fp["project"], fp["train"], mode="supervised", reward=0.0, steps=[{
        "actor": "edited", "thought": "t", "action": {"name": "click", "args": {"x": 1, "y": 2}},
        "proposal": {"thought": "t", "action": {"name": "click", "args": {"x": 9, "y": 9}},
                     "raw": "Thought: t\nAction: click(x=9, y=9)"}}])
    with django_capture_on_commit_callbacks(execute=False):
        cycle = cycles.cycle_start(project=fp["project"], actor=fp["manager"])
        assert cycles.cycle_gate(cycle_id=cycle.pk) == CycleState.SNAPSHOT
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == CycleState.TRAIN
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == "busy or moved on"
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"  # a duplicate creates no second run
    cycle.refresh_from_db()
    # the gate already drops the SFT stage: its episode makes no row (issue 23: stages whose rows cannot help)
    assert cycle.decision_data["gate"]["stages"]["sft"] == {"ok": False, "new": 0, "needed": 1,
                                                            "why": "sft: 0 new rows, its recipe needs at least 1"}
    assert dict(cycle.snapshots.values_list("kind", "status")) == {"dpo": "ready"}
    run = TrainingRun.objects.get(config__cycle=cycle.pk)
    assert [s["algorithm"] for s in run.config["stages"]] == ["dpo"] and run.init_checkpoint == fp["untrained"]
    assert run.config["checkpoint_name"] == "c1" and cycle.run == run


# --- deciding and deploying --------------------------------------------------------------------------------
def _decided_cycle(fp, tmp_path, candidate_rate: float, deployed_rate: float, **config) -> Cycle:
    """A cycle that reached `decide` with a real candidate checkpoint and measured success rates."""
    from trainer.model import save_tiny_untrained

    candidate = deployments.checkpoint_register(project=fp["project"], name="c1",
                                             uri=str(save_tiny_untrained(tmp_path / "c1", seed=1)))
    cycle = Cycle.objects.create(project=fp["project"], iteration=1, state=CycleState.DECIDE, candidate=candidate,
                                 baseline=fp["untrained"], config={**cycle_settings.settings_clean(fp["project"], {}), **config})
    for checkpoint, rate, role in ((candidate, candidate_rate, "candidate"), (fp["untrained"], deployed_rate, "deployed")):
        Evaluation.objects.create(checkpoint=checkpoint, cycle=cycle, role=role, episodes=20, success_rate=rate)
    return cycle


def test_a_better_candidate_is_deployed_and_a_worse_one_rejected_with_the_numbers(flywheel_project, tmp_path):
    fp = flywheel_project
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=0.25, deployed_rate=0.2)  # +5 points, the margin exactly
    assert decide.cycle_decide(cycle_id=cycle.pk) == CycleState.DEPLOYED
    cycle.refresh_from_db()
    active = Deployment.objects.get(project=fp["project"], active=True)
    assert active.checkpoint == cycle.candidate and cycle.deployment == active
    assert cycle.decision.startswith("promote: c1 25.0% vs deployed untrained 20.0% on the same 20 eval episodes")

    worse = _decided_cycle(make_project_like(fp), tmp_path / "b", candidate_rate=0.3, deployed_rate=0.3)
    assert decide.cycle_decide(cycle_id=worse.pk) == CycleState.REJECTED
    worse.refresh_from_db()
    assert worse.decision == ("rejected: c1 30.0% vs deployed untrained 30.0% on the same 20 eval episodes; "
                              "gain +0.0 points, the margin is 5.0")
    assert worse.decision_data["decision"]["promote"] is False


def test_a_rejection_past_the_reach_of_the_margin_says_what_to_change(flywheel_project, tmp_path):
    """At 97 % deployed, a 5-point margin asks for 102 %: every later cycle would train and be rejected. The decision
    says so, and what a manager can do."""
    fp = flywheel_project
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=1.0, deployed_rate=0.97)
    assert decide.cycle_decide(cycle_id=cycle.pk) == CycleState.REJECTED
    cycle.refresh_from_db()
    assert cycle.decision == ("rejected: c1 100.0% vs deployed untrained 97.0% on the same 20 eval episodes; gain +3.0 "
                              "points, the margin is 5.0; at 97.0% the deployed checkpoint cannot be beaten by the "
                              "margin on these eval tasks: add eval tasks it fails, or lower the margin")
    reachable = _decided_cycle(make_project_like(fp), tmp_path / "b", candidate_rate=0.96, deployed_rate=0.95)
    assert decide.cycle_decide(cycle_id=reachable.pk) == CycleState.REJECTED  # 95 % + 5 points is reachable
    reachable.refresh_from_db()
    assert "cannot be beaten" not in reachable.decision and reachable.decision_data["decision"]["promote"] is False
    perfect = _decided_cycle(make_project_like(fp), tmp_path / "c", candidate_rate=1.0, deployed_rate=1.0, margin=0.0)
    assert decide.cycle_decide(cycle_id=perfect.pk) == CycleState.REJECTED  # no margin, but a gain must be above 0
    perfect.refresh_from_db()
    assert "; at 100.0% the deployed checkpoint cannot be beaten by the margin" in perfect.decision, perfect.decision


def test_an_earlier_cycles_measurement_on_the_same_plan_is_reused_and_another_plan_is_measured(flywheel_project,
                                                                                               tmp_path, monkeypatch):
    """The deployed checkpoint was measured as the candidate in the cycle before, on the same seeds, step limits and
    prompting: greedy decoding gives the same episodes, so the cycle stores that measurement (saying where it came
    from) instead of rolling them out again; with other seeds it is measured anew."""
    from cycles import evaluation
    from training import trainer_process

    fp = flywheel_project
    project, checkpoint = fp["project"], fp["untrained"]
    config = cycle_settings.settings_clean(project, {})
    plan = evaluation.eval_plan(project, config)
    first = Cycle.objects.create(project=project, iteration=1, state=CycleState.DEPLOYED, config=config)
    per_task = {"click-test": {"episodes": 4, "success_rate": 0.5, "mean_reward": 0.5, "mean_steps": 1.5,
                               "void_rate": 0.0}}
    earlier = Evaluation.objects.create(
        checkpoint=checkpoint, cycle=first, role="candidate", seeds={"click-test": "100000-100003"}, episodes=4,
        success_rate=0.5, mean_reward=0.5, details={"per_task": per_task, "eval_seconds": 9.0, "plan": plan,
                                                    "prompting": evaluation.eval_prompting(first, checkpoint)})

    def rollout(*args, **kwargs):
        raise AssertionError("rolled out again")

    monkeypatch.setattr(trainer_process, "stream", rollout)
    second = Cycle.objects.create(project=project, iteration=2, state=CycleState.EVALUATE, config=config)
    evaluation.evaluate_checkpoint(second, checkpoint, "deployed", plan, (4, 8), tmp_path)
    reused = Evaluation.objects.get(cycle=second)
    assert (reused.role, reused.success_rate, reused.episodes, reused.seeds) == \
        ("deployed", 0.5, 4, {"click-test": "100000-100003"})
    assert reused.details["per_task"] == per_task
    assert reused.details["reused_from"] == {"cycle": 1, "evaluation": earlier.pk, "eval_seconds": 9.0}
    assert Cycle.objects.get(pk=second.pk).progress["done"] == 8
    shown = client_for(fp["manager"]).get(f"/api/v1/cycles/{second.pk}/").json()["evaluations"][0]
    assert shown["reused_from"]["cycle"] == 1 and shown["per_task"] == per_task

    Cycle.objects.filter(pk=second.pk).update(state=CycleState.REJECTED)  # one running cycle a project
    more_seeds = cycle_settings.settings_clean(project, {"eval_seeds": 8})
    third = Cycle.objects.create(project=project, iteration=3, state=CycleState.EVALUATE, config=more_seeds)
    with pytest.raises(AssertionError, match="rolled out again"):
        evaluation.evaluate_checkpoint(third, checkpoint, "deployed", evaluation.eval_plan(project, more_seeds),
                                       (0, 8), tmp_path)
    assert not Evaluation.objects.filter(cycle=third).exists()


def test_a_cycles_evaluation_answers_with_the_policy_threads(flywheel_project, tmp_path, monkeypatch, settings):
    """The eval subprocess answers as a worker's policy does, with LOUPE_POLICY_THREADS torch threads (a thread a core
    beside another busy process made an evaluation ten times slower)."""
    from cycles import evaluation
    from training import trainer_process

    fp = flywheel_project
    config = cycle_settings.settings_clean(fp["project"], {})
    cycle = Cycle.objects.create(project=fp["project"], iteration=1, state=CycleState.EVALUATE, config=config)
    commands = []

    def rollout(argv, on_progress, **kwargs):
        commands.append(argv)
        return None, "stopped here", 1

    monkeypatch.setattr(trainer_process, "stream", rollout)
    for threads, expected in ((1, ["--threads", "1"]), (0, [])):
        settings.LOUPE_POLICY_THREADS = threads
        with pytest.raises(evaluation.EvaluationFailed):
            evaluation.evaluate_checkpoint(cycle, fp["untrained"], "deployed",
                                           evaluation.eval_plan(fp["project"], config), (0, 4), tmp_path)
        argv = commands[-1]
        assert argv[argv.index("eval") - 2:argv.index("eval") + 1] == ["-m", "trainer", "eval"]
        shown = [argv[i:i + 2] for i in range(len(argv)) if argv[i] == "--threads"]
        assert shown == ([expected] if expected else []), argv


def make_project_like(fp):
    """Another project set up like ``fp`` (its own untrained checkpoint deployed)."""
    import tempfile
    from pathlib import Path

    project = make_project()
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=2)
    untrained = make_tiny_checkpoint(project, Path(tempfile.mkdtemp()) / "untrained")
    return {**fp, "project": project, "untrained": untrained}


def test_the_first_trained_candidate_replaces_the_scripted_baseline(flywheel_project, tmp_path):
    from rollouts.models import Checkpoint

    fp = flywheel_project
    oracle = Checkpoint.objects.create(project=fp["project"], name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=fp["project"], checkpoint=oracle, backend="scripted")
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=0.1, deployed_rate=0.0)
    Evaluation.objects.filter(cycle=cycle, role="deployed").delete()  # the baseline has no weights to evaluate
    Cycle.objects.filter(pk=cycle.pk).update(baseline=oracle)
    assert decide.cycle_decide(cycle_id=cycle.pk) == CycleState.DEPLOYED
    cycle.refresh_from_db()
    assert cycle.decision.startswith("promote: c1 reaches 10.0%; the project serves the scripted baseline")
    assert cycle.decision_data["decision"]["deployed"] is None


def test_awaiting_approval_then_a_manager_approves_by_hand(flywheel_project, tmp_path):
    fp = flywheel_project
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=0.5, deployed_rate=0.1, auto_deploy=False)
    assert decide.cycle_decide(cycle_id=cycle.pk) == "awaiting approval"
    assert Deployment.objects.get(project=fp["project"], active=True).checkpoint == fp["untrained"]
    response = client_for(fp["manager"]).post(f"/api/v1/cycles/{cycle.pk}/approve")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "deployed" and body["decision"].startswith(f"approved by {fp['manager'].username}")
    assert Deployment.objects.get(project=fp["project"], active=True).checkpoint_id == body["candidate"]["id"]
    assert AuditEntry.objects.filter(action="cycle.approve", target=f"cycle:{cycle.pk}").exists()


def test_a_manager_approves_a_rejected_candidate_over_the_gate(flywheel_project, tmp_path):
    fp = flywheel_project
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=0.1, deployed_rate=0.2)
    assert decide.cycle_decide(cycle_id=cycle.pk) == CycleState.REJECTED
    body = client_for(fp["manager"]).post(f"/api/v1/cycles/{cycle.pk}/approve").json()
    assert body["state"] == "deployed" and "rejected: c1 10.0%" in body["decision"]
    again = client_for(fp["manager"]).post(f"/api/v1/cycles/{cycle.pk}/approve")
    assert again.status_code == 409 and "deployed" in again.json()["detail"]


def test_a_corrupt_candidate_is_refused_and_the_deployment_stays(flywheel_project, tmp_path):
    fp = flywheel_project
    cycle = _decided_cycle(fp, tmp_path, candidate_rate=0.9, deployed_rate=0.0)
    weights = tmp_path / "c1" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated on disk after it was evaluated
    assert decide.cycle_decide(cycle_id=cycle.pk) == CycleState.FAILED
    cycle.refresh_from_db()
    assert cycle.error.startswith("The deployment was refused: The weights in") and "corrupt" in cycle.error
    assert Deployment.objects.get(project=fp["project"], active=True).checkpoint == fp["untrained"]
    with pytest.raises(ApplicationError, match="corrupt"):
        deployments.deployment_promote(project=fp["project"], checkpoint=cycle.candidate)


# --- rollback ------------------------------------------------------------------------------------------------
def test_rollback_restores_an_earlier_deployment_in_one_call_and_is_audited(flywheel_project, tmp_path):
    from trainer.model import save_tiny_untrained

    fp = flywheel_project
    project = fp["project"]
    first = Deployment.objects.get(project=project, active=True)
    newer = deployments.checkpoint_register(project=project, name="v2", uri=str(save_tiny_untrained(tmp_path / "v2")))
    deployments.deployment_promote(project=project, checkpoint=newer)
    manager = client_for(fp["manager"])
    response = manager.post(f"/api/v1/projects/{project.pk}/deployments/{first.pk}/rollback")
    assert response.status_code == 200, response.content
    assert response.json()["checkpoint"]["name"] == "untrained" and response.json()["active"] is True
    assert list(Deployment.objects.filter(project=project, active=True).values_list("checkpoint__name", flat=True)) == [
        "untrained"]
    assert AuditEntry.objects.filter(action="deployment.rollback", target=f"deployment:{first.pk}",
                                     actor=fp["manager"]).exists()
    again = manager.post(f"/api/v1/projects/{project.pk}/deployments/{response.json()['id']}/rollback")
    assert again.status_code == 409 and "already the active one" in again.json()["detail"]


def test_rollback_to_a_deleted_checkpoint_is_refused_and_nothing_changes(flywheel_project, tmp_path):
    import shutil

    from trainer.model import save_tiny_untrained

    fp = flywheel_project
    project = fp["project"]
    gone = deployments.checkpoint_register(project=project, name="gone", uri=str(save_tiny_untrained(tmp_path / "gone")))
    old = deployments.deployment_promote(project=project, checkpoint=gone)
    current = deployments.deployment_promote(project=project, checkpoint=fp["untrained"])
    shutil.rmtree(tmp_path / "gone")
    response = client_for(fp["manager"]).post(f"/api/v1/projects/{project.pk}/deployments/{old.pk}/rollback")
    assert response.status_code == 409 and "does not exist" in response.json()["detail"]
    assert Deployment.objects.get(project=project, active=True) == current
    assert not AuditEntry.objects.filter(action="deployment.rollback").exists()
    other = make_project_like(fp)
    foreign = Deployment.objects.get(project=other["project"], active=True)
    response = client_for(fp["manager"]).post(f"/api/v1/projects/{project.pk}/deployments/{foreign.pk}/rollback")
    assert response.status_code == 404


# --- whole cycles on a real worker and the real trainer ------------------------------------------------------
@pytest.fixture(scope="module")
def cycle_worker(module_stack, tmp_path_factory):
    """A worker on every queue (rollouts for the scripted episodes; default and train for the cycle), writing its
    checkpoints under a temporary directory."""
    global _STACK
    stack, path = module_stack
    _STACK = stack
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    return start_worker(stack, path, stack_env(LOUPE_CHECKPOINT_DIR=checkpoints), concurrency=2)


_STACK = None


def wait_cycle(cycle_id: int, timeout: float = 300) -> Cycle:
    def ended():
        cycle = Cycle.objects.get(pk=cycle_id)
        return cycle if cycle.state in ("deployed", "rejected", "skipped", "failed") else None

    try:
        return wait_for(ended, timeout, interval=0.5, what=f"cycle {cycle_id} to end")
    except AssertionError:
        cycle = Cycle.objects.get(pk=cycle_id)
        raise AssertionError(f"cycle {cycle_id} still {cycle.state} ({cycle.progress}, worker {cycle.worker!r})\n"
                             f"{_STACK.tail(60) if _STACK else ''}") from None


def scripted_demonstrations(fp, seeds, task=None) -> None:
    """Real episodes on the train task, acted by the scripted solvers through the rollout worker (then the untrained
    checkpoint is deployed again): SFT rows with the prompts a policy really saw."""
    from rollouts.models import Checkpoint, Episode

    project = fp["project"]
    oracle = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=oracle, backend="scripted", reason="test demonstrations")
    started = episodes.episodes_start(project=project, task=task or fp["train"], seeds=list(seeds), mode="autonomous",
                                      actor=fp["manager"])
    ids = [e.pk for e in started]
    try:
        wait_for(lambda: Episode.objects.filter(pk__in=ids, status="finished").count() == len(ids), 420,
                 interval=0.5, what="the scripted episodes")
    except AssertionError:
        from collections import Counter

        statuses = Counter(Episode.objects.filter(pk__in=ids).values_list("status", flat=True))
        raise AssertionError(f"scripted episodes not all finished after 420 s: {dict(statuses)}\n"
                             f"{_STACK.tail(80) if _STACK else ''}") from None
    unsolved = Episode.objects.filter(pk__in=ids).exclude(env_reward__gte=0.5)
    assert not unsolved.exists(), [(e.seed, e.env_reward, e.end_reason, list(e.steps.values_list("action_text")))
                                   for e in unsolved[:2]]
    deployments.deployment_promote(project=project, checkpoint=fp["untrained"], reason="back to the untrained policy")


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
@pytest.mark.timeout(1500)  # about 2 minutes on an idle 2-core machine; far more when it is shared
def test_a_cycle_deploys_a_better_candidate_then_rejects_a_worse_one(flywheel_project, cycle_worker):
    from rollouts.models import Episode

    fp = flywheel_project
    project, manager = fp["project"], client_for(fp["manager"])
    # terminal-count: the same instruction and the same two turns on every seed (type the command, press enter), which
    # the tiny random model learns in a few dozen steps. On click-test it must copy the button's coordinates off the
    # screen, which it does not learn in a test's time: it learnt one click that hits some seeds' buttons, 37.5 % of
    # the eval seeds on one machine and 0 % on CI's, and the cycle was rejected there.
    train = make_task(project, "terminal-count", env_kind="terminal", seed_start=0, seed_end=999, max_steps=3)
    held_out = make_task(project, "terminal-count", env_kind="terminal", split="eval", seed_start=100_000,
                         seed_end=100_099, max_steps=2)
    # Four seeds: their rows are two distinct turns, four times each, all in every step's batch. A step's gradient
    # (the mean over the answer tokens) is the one 15 seeds gave, at a quarter of the tokens (train 130 -> 35 s).
    scripted_demonstrations(fp, range(4), task=train)
    # No validation split: this test is about the gate and the deployment (the early stop has tests of its own).
    # Four eval seeds: the trained candidate answers every one, the untrained none (a margin of 100 points, not 5)
    cycle_settings.settings_set(project=project, actor=fp["manager"], eval_seeds=4, eval_tasks=[held_out.pk],
                                val_fraction=0, patience=0,
                                recipe=[{"algorithm": "sft", "max_steps": 60, "lr": 0.005, "max_epochs": 0}])  # 60 passes
    started = manager.post(f"/api/v1/projects/{project.pk}/cycles/")
    assert started.status_code == 202, started.content
    first = wait_cycle(started.json()["id"], timeout=900)
    print("cycle 1 timings", json.dumps({k: v.get("seconds") for k, v in first.timings.items()}))
    body = manager.get(f"/api/v1/cycles/{first.pk}/").json()
    assert body["state"] == "deployed", (body["error"], body["log_tail"], body["decision"])
    assert [s["kind"] for s in body["snapshots"]] == ["sft"] and body["snapshots"][0]["rows"] == 8  # two turns each
    assert body["run"]["status"] == "succeeded" and body["run"]["metrics"] and body["candidate"]["name"] == "c1"
    rates = {e["role"]: e for e in body["evaluations"]}
    print("cycle 1 success", {role: e["success_rate"] for role, e in rates.items()})
    assert rates["candidate"]["seeds"] == rates["deployed"]["seeds"] == {"terminal-count": "100000-100003"}
    assert rates["candidate"]["success_rate"] > rates["deployed"]["success_rate"] + 0.05 - 1e-9, rates
    assert body["decision"].startswith("promote: c1")
    assert set(body["timings"]) == {"gate", "snapshot", "train", "evaluate", "decide"}
    active = Deployment.objects.get(project=project, active=True)
    assert active.checkpoint.name == "c1" and body["deployment"] == active.pk
    # an episode started after the promotion runs on the new checkpoint, with no restart of the worker
    after = episodes.episodes_start(project=project, task=train, seeds=[500], mode="autonomous",
                                    actor=fp["manager"])[0]
    wait_for(lambda: Episode.objects.get(pk=after.pk).status in ("finished", "failed"), 120, what="the episode")
    assert Episode.objects.get(pk=after.pk).checkpoint.name == "c1"

    # a second cycle whose recipe wrecks the weights (a learning rate 150 times too high): measured, then rejected
    cycle_settings.settings_set(project=project, actor=fp["manager"], min_new_rows=0,
                        recipe=[{"algorithm": "sft", "max_steps": 4, "lr": 0.45}])
    second = wait_cycle(manager.post(f"/api/v1/projects/{project.pk}/cycles/").json()["id"], timeout=600)
    assert second.state == "rejected", (second.error, second.decision)
    numbers = second.decision_data["decision"]
    assert numbers["candidate"]["success_rate"] < numbers["deployed"]["success_rate"] and not numbers["promote"]
    assert second.decision.startswith("rejected: c2 ") and "vs deployed c1" in second.decision
    assert Deployment.objects.get(project=project, active=True).checkpoint.name == "c1"
    assert Evaluation.objects.filter(cycle=second).count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_killed_training_subprocess_fails_the_cycle_with_its_log_and_keeps_the_deployment(flywheel_project,
                                                                                             cycle_worker, warm_trainer):
    import os
    import signal

    import psutil

    fp = flywheel_project
    for _ in range(3):
        sft_episode(fp)
    cycle_settings.settings_set(project=fp["project"], actor=fp["manager"], recipe=[{"algorithm": "sft", "max_steps": 100000,
                                                                             "max_epochs": 0}])  # trains until killed
    cycle = cycles.cycle_start(project=fp["project"], actor=fp["manager"])

    def training():
        run = TrainingRun.objects.filter(config__cycle=cycle.pk, status="running").first()
        return run if run is not None and run.metrics else None

    try:
        run = wait_for(training, 120, interval=0.5, what="the training run to report progress")
    except AssertionError:
        cycle.refresh_from_db()
        runs = list(TrainingRun.objects.filter(config__cycle=cycle.pk).values("status", "metrics", "log"))
        raise AssertionError(f"no training progress after 120 s: cycle {cycle.state} {cycle.progress} "
                             f"{cycle.error!r}, runs {runs}\n{_STACK.tail(60) if _STACK else ''}") from None
    # this module's worker's own trainer (its subprocess, or a child of this pytest process's warm trainer): another
    # test worker's database has a run of the same id, and may train it now
    def cmdline(process):
        try:
            return process.cmdline()
        except psutil.Error:  # ended meanwhile
            return []
    parents = [psutil.Process(cycle_worker.pid), psutil.Process(warm_trainer[1].pid)]
    trainer = [p for parent in parents for p in parent.children(recursive=True)
               if "trainer" in cmdline(p) and any(f"run-{run.pk}" in a for a in cmdline(p))]
    assert len(trainer) == 1
    os.kill(trainer[0].pid, signal.SIGKILL)  # e.g. the kernel's OOM killer
    ended = wait_cycle(cycle.pk, timeout=120)
    assert ended.state == "failed" and ended.error.startswith(f"The training run #{run.pk} failed: trainer sft was "
                                                               "killed (SIGKILL), most likely by the kernel for want of "
                                                               "memory"), ended.error
    assert "$ python -m trainer sft --data" in ended.log_tail and ended.decision == "failed in train; the deployment is unchanged"
    assert Deployment.objects.get(project=fp["project"], active=True).checkpoint == fp["untrained"]
    worker_quiet()


# --- the openai backend: vLLM-style runtime adapter loading -------------------------------------------------
def start_policy_server(init: str, tmp_path, name: str):
    """`python -m trainer serve` (vLLM's OpenAI API and runtime LoRA loading, on a CPU); (process, base url)."""
    with open(tmp_path / f"serve-{name}.log", "wb") as log:
        proc = trainer_start("serve", "--init", init, "--port", "0", "--name", name, stderr=log)
    line = proc.stdout.readline()
    assert line.startswith("{"), (tmp_path / f"serve-{name}.log").read_text()[-2000:]
    return proc, json.loads(line)["serving"]


def served_models(url: str) -> set[str]:
    import urllib.request

    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=10) as response:
        return {m["id"] for m in json.load(response)["data"]}


def test_openai_deploy_loads_the_adapter_by_a_new_name_and_rollouts_ask_for_it(flywheel_project, tmp_path, settings):
    from agent.prompt import render_messages
    from rollouts.models import Episode
    from rollouts.worker import policy_for

    fp = flywheel_project
    project, base = fp["project"], fp["untrained"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"messages": [{"role": "system", "content": "Act."}, {"role": "user", "content": "Task: x"},
                                             {"role": "assistant", "content": "Thought: t\nAction: wait()"}]}) + "\n")
    trainer_run("sft", "--data", str(rows), "--init", base.uri, "--out", str(tmp_path / "c1"), "--lora", "r=4",
                "--max-steps", "2")
    assert (tmp_path / "c1" / "adapter" / "adapter_config.json").is_file()
    candidate = deployments.checkpoint_register(project=project, name="c1", uri=str(tmp_path / "c1"), parent=base)
    config = cycle_settings.settings_set(project=project, actor=fp["manager"], backend="openai", export="lora",
                                 base_checkpoint=base.pk)
    assert config["recipe"][0]["lora"] == "r=8"  # adapters are trained on the served base
    cycle = Cycle.objects.create(project=project, iteration=1, state=CycleState.REJECTED, candidate=candidate,
                                 baseline=base, config=cycle_settings.settings_clean(project, {}),
                                 decision_data={"decision": {"text": "rejected: c1 0.0% vs untrained 0.0%"}})
    server, url = start_policy_server(base.uri, tmp_path, "base")
    try:
        settings.LOUPE_OPENAI_BASE_URL = url
        approved = client_for(fp["manager"]).post(f"/api/v1/cycles/{cycle.pk}/approve")
        assert approved.status_code == 200, approved.content
        active = Deployment.objects.get(project=project, active=True)
        assert (active.backend, active.served_name) == ("openai", f"{project.slug}-c1")
        assert served_models(url) == {"base", active.served_name}  # loaded at run time, no restart
        episode = Episode.objects.create(project=project, task=fp["train"], seed=1, checkpoint=candidate)
        policy = policy_for(episode)
        assert (policy.name, policy.model) == ("openai", active.served_name)
        out = policy.act(render_messages(instruction="Click", observation_text="Task: Click", history=[]))
        assert out.error is None and out.model == active.served_name, out.error

        deployments.deployment_promote(project=project, checkpoint=base, reason="back to local")
        server.terminate()
        server.wait()
        server, url = start_policy_server(base.uri, tmp_path, "restarted")  # the adapter is gone with the old server
        settings.LOUPE_OPENAI_BASE_URL = url
        rolled = client_for(fp["manager"]).post(f"/api/v1/projects/{project.pk}/deployments/{active.pk}/rollback")
        assert rolled.status_code == 200, rolled.content
        assert rolled.json()["served_name"] == active.served_name and active.served_name in served_models(url)
        server.terminate()
        server.wait()
        current = client_for(fp["manager"]).post(
            f"/api/v1/projects/{project.pk}/deployments/{rolled.json()['id']}/rollback")
        assert current.status_code == 409  # already the active one
        deployments.deployment_promote(project=project, checkpoint=base, reason="local again")
        refused = client_for(fp["manager"]).post(f"/api/v1/projects/{project.pk}/deployments/{active.pk}/rollback")
        assert refused.status_code == 502 and "cannot be reached" in refused.json()["detail"]
        assert Deployment.objects.get(project=project, active=True).checkpoint == base
    finally:
        server.kill()
        server.wait()
