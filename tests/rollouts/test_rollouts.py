"""Episodes run by a real Celery worker with the tiny local policy in the real Chromium."""
import pytest
from django.core.files.storage import default_storage
from rest_framework.test import APIClient

from agent.prompt import system_prompt
from rollouts.models import Episode, EpisodeStatus, Event, Step
from tests.factories import make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def start(client, project, task, seeds):
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task.pk, "seeds": seeds},
                           format="json")
    assert response.status_code == 201, response.content
    return [row["id"] for row in response.json()["results"]]


def test_autonomous_episode_records_every_step_and_event(celery_worker, rollout_project):
    project, task, checkpoint, client = rollout_project
    [episode_id] = start(client, project, task, [7])
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 300, what="the episode")
    episode = Episode.objects.get(pk=episode_id)
    assert episode.status == EpisodeStatus.FINISHED, episode.end_reason
    assert episode.checkpoint_id == checkpoint.pk
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert steps and [s.index for s in steps] == list(range(len(steps)))
    for step in steps:
        # the tiny checkpoint reads the named prompt style it was made with (its loupe.json)
        assert step.prompt and step.prompt[0] == {"role": "system", "content": system_prompt("named")}
        assert step.checkpoint_id == checkpoint.pk
        assert len(step.token_ids) == len(step.token_logprobs) > 0
        assert all(lp <= 0 for lp in step.token_logprobs)
        assert step.void == (step.action is None)
        assert default_storage.exists(step.screenshot)
        assert step.width > 0 and step.prompt[1]["content"].startswith("Task: ")
        assert '[button]' in step.prompt[-1]["content"]
    seqs = list(Event.objects.filter(episode=episode).order_by("seq").values_list("seq", "type"))
    assert [s for s, _ in seqs] == list(range(1, len(seqs) + 1))
    types = [t for _, t in seqs]
    assert types.count("step.executed") == len(steps)
    assert types[-1] == "episode.finished"
    detail = client.get(f"/api/v1/episodes/{episode_id}/").json()
    assert len(detail["steps"]) == len(steps)
    image = client.get(detail["steps"][0]["screenshot_url"])
    assert image.status_code == 200 and image["Content-Type"] == "image/jpeg"


def test_screenshots_are_refused_to_non_members(celery_worker, rollout_project):
    project, task, checkpoint, client = rollout_project
    task.max_steps = 1  # one step is all this needs, and the worker is free for the next test sooner
    task.save(update_fields=["max_steps"])
    [episode_id] = start(client, project, task, [8])
    wait_for(lambda: Step.objects.filter(episode_id=episode_id).exists(), 300, what="a step")
    outsider = APIClient()
    outsider.force_authenticate(make_user())
    assert outsider.get(f"/api/v1/episodes/{episode_id}/steps/0/screenshot").status_code == 404
    assert outsider.get(f"/api/v1/episodes/{episode_id}/").status_code == 404
