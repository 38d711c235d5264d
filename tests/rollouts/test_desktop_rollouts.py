"""Desktop tasks in the loop: the tasks API takes them, and a real rollout worker runs a desktop episode on a
real Xvfb to the task's evaluator, storing 1280x720 screenshots; when its desktops die mid-episode the episode fails
saying so and the next one runs on new desktops; the worker leaves no X server behind."""
import io
import shutil

import psutil
import pytest
from django.core.files.storage import default_storage
from PIL import Image
from rest_framework.test import APIClient

from training import deployments
from rollouts.models import Checkpoint, Episode, EpisodeStatus, Step
from tests.factories import make_member, make_project, make_user
from tests.stack import start_worker, stack_env, wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("galculator") is None,
                       reason="needs the desktop packages (make test-tools installs them)"),
]


@pytest.fixture
def manager_client():
    project = make_project("Desktop")
    manager = make_user()
    make_member(project, manager, "manager")
    client = APIClient()
    client.force_authenticate(manager)
    return project, client


def test_tasks_api_takes_a_desktop_task_and_names_an_unknown_one(manager_client):
    project, client = manager_client
    url = f"/api/v1/projects/{project.pk}/tasks/"
    created = client.post(url, {"env_kind": "desktop", "task_name": "desktop-calc-multiply", "max_steps": 12},
                          format="json")
    assert created.status_code == 201, created.content
    assert created.json()["env_kind"] == "desktop"
    unknown = client.post(url, {"env_kind": "desktop", "task_name": "desktop-photoshop-crop"}, format="json")
    assert unknown.status_code == 400
    assert "'desktop-photoshop-crop' is not a registered desktop task." in unknown.content.decode()
    kind = client.post(url, {"env_kind": "desktops", "task_name": "desktop-calc-multiply"}, format="json")
    assert kind.status_code == 400 and "Unknown environment kind 'desktops'." in kind.content.decode()


def _xvfb_of(worker) -> set[int]:
    """The live X servers the worker's processes started (other tests may run desktops beside it)."""
    try:
        children = psutil.Process(worker.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return set()
    return {p.pid for p in children if p.name() == "Xvfb" and p.status() != psutil.STATUS_ZOMBIE}


def _two(pids: set[int]) -> set[int] | None:
    return pids if len(pids) == 2 else None


def _xvfb_pids() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name", "status"])
            if p.info["name"] == "Xvfb" and p.info["status"] != psutil.STATUS_ZOMBIE}


def test_a_worker_runs_an_autonomous_desktop_episode_to_its_evaluator(manager_client, process_stack, tmp_path):
    from trainer.model import save_tiny_untrained

    project, client = manager_client
    task, long_task = (client.post(f"/api/v1/projects/{project.pk}/tasks/",
                                   {"env_kind": "desktop", "task_name": name, "max_steps": 12}, format="json").json()
                       for name in ("desktop-calc-subtract", "desktop-calc-multiply"))
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    worker = start_worker(process_stack, tmp_path, stack_env(LOUPE_DESKTOP_POOL=1), queues="rollouts,default")
    episode_id = start(client, project, task["id"])
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 120,
             what=f"the desktop episode\n{process_stack.tail()}")
    episode = Episode.objects.get(pk=episode_id)
    assert episode.status == EpisodeStatus.FINISHED, episode.end_reason
    assert episode.env_reward == 1.0 and episode.end_reason == "finished"
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.action_text for s in steps] == ['type(text="1024-25")', 'hotkey(keys="enter")', 'finished(answer="")']
    assert steps[0].thought == "I type '1024-25'." and steps[0].url == "desktop://desktop-calc-subtract"
    for step in steps:
        assert (step.width, step.height) == (1280, 720)
        with default_storage.open(step.screenshot, "rb") as handle:
            assert Image.open(io.BytesIO(handle.read())).size == (1280, 720)
    assert any(e["role"] == "toggle button" and e["text"] == "=" for e in steps[-1].elements)

    # the episode's desktop and one kept warm (LOUPE_DESKTOP_POOL=1)
    started = wait_for(lambda: _two(_xvfb_of(worker)), 30, what="two desktops")

    # the desktops die mid-episode: the episode fails saying why, and the next one gets new desktops
    dying = start(client, project, long_task["id"])  # eight steps: it is still running when they die
    wait_for(lambda: Step.objects.filter(episode_id=dying).exists(), 60, what="the first step")
    for pid in started:
        psutil.Process(pid).kill()
    wait_for(lambda: Episode.objects.get(pk=dying).status in ("finished", "failed"), 60, what="the episode to fail")
    failed = Episode.objects.get(pk=dying)
    assert failed.status == EpisodeStatus.FAILED and "X server (Xvfb :" in failed.end_reason, failed.end_reason
    # the buttons clicked, not typed: galculator drops a key pressed again while its button still shows pressed, and
    # on a loaded machine its main loop runs late enough for a typed "1024-25" to lose its second 2 (CI, twice)
    after = start(client, project, long_task["id"])
    wait_for(lambda: Episode.objects.get(pk=after).status in ("finished", "failed"), 120, what="the next episode")
    assert Episode.objects.get(pk=after).env_reward == 1.0, Episode.objects.get(pk=after).end_reason

    started = wait_for(lambda: _two(_xvfb_of(worker)), 30, what="the pool to make up its warm desktop")
    process_stack.stop()
    assert worker.poll() is not None
    wait_for(lambda: not (_xvfb_pids() & started), 10, what="the worker's X servers to end")


def start(client, project, task_id: int) -> int:
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task_id, "seeds": [0]}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["results"][0]["id"]


def test_demo_project_gets_desktop_tasks_where_the_desktop_is_installed(monkeypatch, caplog):
    from projects.models import TaskSpec
    from webapp import demo

    demo.seed_demo("a-demo-password")
    desktop = set(TaskSpec.objects.filter(project__slug="demo", env_kind="desktop").values_list("task_name", "split"))
    assert desktop == {(name, "train") for name in demo.DEMO_DESKTOP_TASKS}
    assert TaskSpec.objects.filter(project__slug="demo", env_kind="miniwob").count() > 10

    TaskSpec.objects.filter(env_kind="desktop").delete()
    monkeypatch.setitem(demo.DEMO_DESKTOP_TASKS, "desktop-sheet-total", ("no-such-spreadsheet",))
    demo.seed_demo("a-demo-password")
    seeded = set(TaskSpec.objects.filter(env_kind="desktop").values_list("task_name", flat=True))
    assert seeded == set(demo.DEMO_DESKTOP_TASKS) - {"desktop-sheet-total"}
    assert "no desktop-sheet-total task, as no-such-spreadsheet is not installed" in caplog.text
    TaskSpec.objects.filter(env_kind="desktop").delete()
    monkeypatch.setattr(demo, "DESKTOP_PROGRAMS", (*demo.DESKTOP_PROGRAMS, "no-such-x-server"))
    demo.seed_demo("a-demo-password")
    assert not TaskSpec.objects.filter(env_kind="desktop").exists()
