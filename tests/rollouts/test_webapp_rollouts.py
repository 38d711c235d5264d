"""Webapp tasks in the loop: the tasks API takes them, and a real rollout worker runs a webapp episode on the
django-oscar shop to its WebArena-format check, storing 1280x720 screenshots; the worker leaves no shop server."""
import io
import subprocess

import pytest
from django.core.files.storage import default_storage
from PIL import Image
from rest_framework.test import APIClient

from training import deployments
from rollouts.models import Checkpoint, Episode, EpisodeStatus, Step
from tests.factories import make_member, make_project, make_user
from tests.stack import start_worker, stack_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def manager_client():
    project = make_project("Webapp")
    manager = make_user()
    make_member(project, manager, "manager")
    client = APIClient()
    client.force_authenticate(manager)
    return project, client


def test_tasks_api_takes_a_webapp_task_and_names_an_unknown_one(manager_client):
    project, client = manager_client
    url = f"/api/v1/projects/{project.pk}/tasks/"
    created = client.post(url, {"env_kind": "webapp", "task_name": "shop-guest-checkout", "max_steps": 50},
                          format="json")
    assert created.status_code == 201, created.content
    assert created.json()["env_kind"] == "webapp"
    unknown = client.post(url, {"env_kind": "webapp", "task_name": "gitlab-create-repo"}, format="json")
    assert unknown.status_code == 400
    assert "'gitlab-create-repo' is not a registered webapp task." in unknown.content.decode()


def _shop_servers() -> set[str]:
    return set(subprocess.run(["pgrep", "-f", "sites/oscar/serve.py"], capture_output=True, text=True).stdout.split())


def test_a_worker_runs_an_autonomous_webapp_episode_to_its_check(manager_client, process_stack, tmp_path):
    from agent.envs.webapp.sites import build_oscar
    from trainer.model import save_tiny_untrained

    build_oscar(quiet=True)  # `make sites` did it already; a no-op then
    project, client = manager_client
    task = client.post(f"/api/v1/projects/{project.pk}/tasks/",
                       {"env_kind": "webapp", "task_name": "shop-price-answer", "max_steps": 12}, format="json").json()
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    before = _shop_servers()
    worker = start_worker(process_stack, tmp_path, stack_env(), queues="rollouts,default")
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task["id"], "seeds": [0]},
                           format="json")
    assert response.status_code == 201, response.content
    [episode_id] = [row["id"] for row in response.json()["results"]]
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 120,
             what=f"the webapp episode\n{process_stack.tail()}")
    episode = Episode.objects.get(pk=episode_id)
    assert episode.status == EpisodeStatus.FINISHED, episode.end_reason
    assert episode.env_reward == 1.0 and episode.end_reason == "finished"
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    # search, open the product (a scroll where the results sit below the fold), read the price
    assert [s.action["name"] for s in steps if s.action["name"] != "scroll"] == [
        "click", "hotkey", "type", "hotkey", "click", "finished"]
    assert steps[-1].action["args"]["answer"] == "£35.00"
    instruction = client.get(f"/api/v1/episodes/{episode_id}/").json()["instruction"]
    assert instruction and instruction == steps[0].instruction  # the shop task's own, for the page and the replay
    assert "/catalogue/power-bank-20000_24/" in steps[-1].url
    for step in steps:
        assert (step.width, step.height) == (1280, 720)
        with default_storage.open(step.screenshot, "rb") as handle:
            assert Image.open(io.BytesIO(handle.read())).size == (1280, 720)
    assert len(_shop_servers() - before) == 1  # the worker's env keeps its shop server between episodes
    process_stack.stop()
    assert worker.poll() is not None
    wait_for(lambda: not (_shop_servers() - before), 10, what="the worker's shop server to end")


def test_an_episode_whose_check_is_the_judges_or_a_persons_stores_no_reward_instead_of_a_failure():
    from agent.actions import Action, Turn
    from agent.envs.base import Observation
    from agent.rollout import EpisodeResult, StepRecord
    from rollouts.worker import finish_reward

    def result(info: dict, reward: float = 0.0) -> EpisodeResult:
        turn = Turn(thought="done", action=Action("finished", {"answer": "ok"}), void_reason=None, raw="")
        step = StepRecord(index=0, observation=Observation(instruction="", url="", screenshot=b"", width=1280, height=720),
                          prompt=[], output=None, turn=turn, actor="model", proposal=None, reward=reward, done=True,
                          info=info)
        return EpisodeResult(reward=reward, steps=[step], end_reason="finished")

    assert finish_reward(result({"verdict": "judge"})) is None
    assert finish_reward(result({"verdict": "person"})) is None
    assert finish_reward(result({}, reward=1.0)) == 1.0
    assert finish_reward(result({}, reward=0.0)) == 0.0  # a check that ran and failed stays a failure
    assert finish_reward(EpisodeResult(reward=0.0, steps=[], end_reason="policy_error")) == 0.0
