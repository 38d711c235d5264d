"""Authored tasks (written as JSON) through the flywheel beyond the rollout worker: a cycle's evaluation runs an
authored any-URL eval task through the real ``python -m trainer eval`` (its JSON handed over in a --task-defs file),
GRPO rows of an authored task carry its JSON in their env reward, and the scripted baseline, which has no solution
for such a task, refuses it in plain words (when it is started, and in the worker for one queued before)."""
from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from agent.actions import Action
from agent.rows import GRPORow, RenderedFor
from core.errors import ApplicationError
from snapshots import buckets
from training import deployments
from rollouts import episodes
from cycles import evaluation
from projects import services
from rollouts.models import Checkpoint, Episode, Step
from cycles.models import Cycle, Evaluation
from tests.agent.test_webapp_env import team_app  # noqa: F401 - the team's own app, served for any-URL tasks
from tests.factories import make_finished_episode, make_tiny_checkpoint
from tests.projects.test_task_authoring import ANY_URL

SCRIPTED = "The deployed policy is the scripted baseline, which can only play the solutions written for the shipped tasks"


def settings_task(project, actor, start_url: str, **kw):
    return services.task_create(project=project, actor=actor, env_kind="webapp", definition={
        "task_id": "team-settings", "start_url": start_url, "instruction": "Open the settings.",
        "check": {"type": "url_match", "url": start_url.replace("index", "settings")}}, **kw)


@pytest.mark.browser
def test_a_cycle_evaluates_an_authored_eval_task_through_trainer_eval(demo, team_app, tmp_path):  # noqa: F811
    project, manager = demo["project"], demo["manager"]
    task = settings_task(project, manager, team_app + "/index.html", split="eval", seed_start=500, seed_end=599)
    plan = evaluation.eval_plan(project, {"eval_tasks": [task.pk], "eval_seeds": 1, "eval_max_steps": 2})
    assert plan == [{"env": "webapp", "seeds": "500-500", "max_steps": 2, "tasks": ["team-settings"],
                     "definitions": {"team-settings": task.definition}}]
    checkpoint = make_tiny_checkpoint(project, tmp_path / "untrained")
    cycle = Cycle.objects.create(project=project, iteration=1, config={})

    evaluation.evaluate_checkpoint(cycle, checkpoint, "candidate", plan, (0, 1), tmp_path / "cycle")

    stored = Evaluation.objects.get(cycle=cycle, checkpoint=checkpoint)
    assert (stored.episodes, stored.success_rate) == (1, 0.0)  # untrained: it never opens the settings
    assert stored.details["plan"] == plan
    out = tmp_path / "cycle" / f"eval-candidate-{checkpoint.pk}-0"
    assert json.loads((tmp_path / "cycle" / f"{out.name}-tasks.json").read_text()) == {
        "team-settings": {"env_kind": "webapp", "definition": task.definition}}
    [episode] = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    # the trainer's env started the authored task (an unknown one ends in env_error, with no step)
    assert episode["error"] is None and episode["steps"] >= 1 and episode["end_reason"] != "env_error", episode


def test_a_grpo_row_of_an_authored_task_carries_its_json_in_the_env_reward(demo):
    project, manager = demo["project"], demo["manager"]
    task = settings_task(project, manager, "http://127.0.0.1:8000/index.html")
    click = {"action": {"name": "click", "args": {"x": 3, "y": 4}}}
    episode = make_finished_episode(project, task, steps=[click, {"action": {"name": "click", "args": {"x": 5, "y": 6}}}])
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    target = RenderedFor(style="full", action_format="uitars", reads_images=True)
    rows = [GRPORow.from_dict(row, "row") for row in buckets.episode_rows("rl", episode, steps, target)]
    assert [row.reward for row in rows] == [
        GRPORow.env_reward("webapp", "team-settings", episode.seed, prefix, task.definition)
        for prefix in ([], [Action.from_dict(click["action"])])]
    assert rows[1].reward["definition"] == task.definition and rows[1].reward["prefix"] == ["click(x=3, y=4)"]
    shipped = make_finished_episode(project, demo["task"], steps=[click])  # a shipped task's reward has no JSON
    assert "definition" not in buckets.episode_rows("rl", shipped, list(shipped.steps.all()), target)[0]["reward"]


def test_the_scripted_baseline_refuses_to_start_an_authored_task_saying_why(demo):
    project, manager = demo["project"], demo["manager"]
    baseline = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=baseline, backend="scripted")
    task = settings_task(project, manager, "http://127.0.0.1:8000/index.html")
    with pytest.raises(ApplicationError, match=f"{SCRIPTED}; 'team-settings' is your own task"):
        episodes.episodes_start(project=project, task=task, seeds=[0], mode="autonomous", actor=manager)
    client = APIClient()
    client.force_authenticate(manager)
    tried = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task.pk, "seeds": [0],
                                                                      "mode": "supervised"}, format="json")
    assert tried.status_code == 409 and tried.json()["detail"].startswith(SCRIPTED), tried.json()
    assert "Deploy a trained checkpoint to run it" in tried.json()["detail"]
    assert not Episode.objects.filter(task=task).exists()
    assert episodes.episodes_start(project=project, task=demo["task"], seeds=[0], mode="autonomous", actor=manager)


@pytest.mark.django_db(transaction=True)
def test_an_authored_episode_queued_before_the_scripted_baseline_came_back_fails_with_the_reason(demo):
    from rollouts import worker as rollout_worker

    project, manager = demo["project"], demo["manager"]
    task = services.task_create(project=project, actor=manager, env_kind="webapp", definition=ANY_URL, max_steps=3)
    episode = Episode.objects.create(project=project, task=task, seed=0, mode="autonomous", created_by=manager)
    baseline = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=baseline, backend="scripted")  # a rollback since
    try:
        assert rollout_worker.run(episode.pk) == "policy_error"  # ended, not raised
    finally:
        rollout_worker.close_envs()
    episode.refresh_from_db()
    assert episode.status == "failed" and episode.end_reason.startswith(f"policy_error: {SCRIPTED}"), episode.end_reason
    assert not episode.steps.exists()
