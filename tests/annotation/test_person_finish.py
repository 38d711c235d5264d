"""A person's Finish is scored by the task's own check, through the real WebSocket, a real rollout worker and a real
desktop (Xvfb): on a hybrid desktop task a person takes over, makes the folder the task asks for and finishes with
success, and the episode stores reward 1; a person who finishes with success at once stores the check's 0 beside
their outcome, and the episode waits for a review instead of being routed as a failure. The episode API returns the
task's instruction from the first proposal on, and the Finish comment."""
import shutil

import pytest
from rest_framework.test import APIClient

from snapshots import buckets
from projects import services
from rollouts.models import Episode, EpisodeStatus, Step
from tests.annotation.test_live_session import Session
from tests.factories import PASSWORD, make_member, make_project, make_tiny_checkpoint, make_user

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs the desktop packages (make test-tools installs them)"),
]

INSTRUCTION = "Make a folder named reports in your home folder."
REPORTS = {"id": "make-reports", "instruction": INSTRUCTION, "hybrid": True, "config": [],
           "evaluator": {"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": "ls ~", "shell": True},
                         "expected": {"type": "rule", "rules": {"include": ["reports"]}}}}


@pytest.fixture
def reports_task(daphne_server, celery_worker, tmp_path_factory):
    project = make_project("Reports")
    manager = make_user("boss")
    make_member(project, manager, "manager")
    make_member(project, make_user("ann"))
    task = services.task_create(project=project, actor=manager, env_kind="desktop", definition=REPORTS, max_steps=6)
    make_tiny_checkpoint(project, tmp_path_factory.mktemp("ckpt") / "untrained")
    client = APIClient()
    client.login(username="ann", password=PASSWORD)
    return daphne_server, project, task, client


def start(client, project, task) -> int:
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task.pk, "seeds": [0],
                                                                         "mode": "supervised"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["results"][0]["id"]


def test_a_persons_success_is_scored_by_the_tasks_check_and_a_contradicted_one_waits_for_review(reports_task):
    base, project, task, client = reports_task

    done = start(client, project, task)
    s = Session(base, done, "ann")
    s.wait_type("step.proposed", index=0)
    detail = client.get(f"/api/v1/episodes/{done}/").json()
    assert detail["instruction"] == INSTRUCTION  # the environment's, from the first proposal on
    s.send("takeover")
    s.wait(lambda m: m["type"] == "control.changed" and m["data"]["human_control"], "takeover")
    assert s.ack(s.send("act", action='shell(command="mkdir ~/reports")', thought="A folder for the reports."))[
        "type"] == "ack"
    s.wait_type("step.executed", index=0)
    s.wait_type("step.proposed", index=1)
    comment = "Made it with mkdir in the terminal. " * 50
    s.send("finish", outcome="success", comment=comment)
    s.wait_type("episode.finished")
    s.ws.close()
    episode = Episode.objects.get(pk=done)
    made = Step.objects.get(episode=episode, index=0)
    assert (made.actor, made.info.get("exit_code"), made.info.get("error")) == ("human", 0, None), made.info
    assert (episode.status, episode.outcome, episode.env_reward, episode.review_reason) == (
        EpisodeStatus.FINISHED, "success", 1.0, ""), episode.end_reason
    detail = client.get(f"/api/v1/episodes/{done}/").json()
    assert (detail["comment"], detail["reward"]) == (comment, 1.0)

    claimed = start(client, project, task)  # a new session, a new home: no folder there
    s = Session(base, claimed, "ann")
    s.wait_type("step.proposed", index=0)
    s.send("finish", outcome="success")
    s.wait_type("episode.finished")
    s.ws.close()
    episode = Episode.objects.get(pk=claimed)
    assert (episode.outcome, episode.env_reward) == ("success", 0.0)  # both kept
    assert episode.review_reason.startswith("A person finished with success (the task was done), but the task's own "
                                            "check paid 0")
    routed = {kind: set(buckets.bucket_episodes(project, kind).values_list("pk", flat=True)) for kind in ("sft", "ct")}
    assert routed == {"sft": {done}, "ct": set()}  # not a failure on the reward alone: it waits for a review
