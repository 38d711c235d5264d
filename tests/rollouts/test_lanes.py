"""People never wait behind machines: supervised episodes run in their own lane (the `live` queue), so a batch
of autonomous episodes filling the rollout workers does not hold one back; a queued episode knows its place."""
import pytest
from rest_framework.test import APIClient

from rollouts import selectors
from rollouts.models import Episode, EpisodeStatus
from tests.factories import make_member, make_project, make_task, make_tiny_checkpoint, make_user
from tests.stack import stack_env, start_together, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def start(client, project, task, seeds, mode="autonomous"):
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/",
                           {"task": task.pk, "seeds": seeds, "mode": mode}, format="json")
    assert response.status_code == 201, response.content
    return [row["id"] for row in response.json()["results"]]


def test_a_supervised_episode_starts_while_a_batch_of_autonomous_ones_waits(process_stack, tmp_path,
                                                                            tmp_path_factory):
    project = make_project()
    annotator = make_user()
    make_member(project, annotator, "manager")
    task = make_task(project, "click-button", max_steps=10)
    make_tiny_checkpoint(project, tmp_path_factory.mktemp("ckpt") / "untrained")
    client = APIClient()
    client.force_authenticate(annotator)
    # as `make run` lays them out: one worker for the machines' episodes, one kept for people's
    start_together(
        lambda: start_worker(process_stack, tmp_path, stack_env(), queues="rollouts", name="machines", concurrency=1),
        lambda: start_worker(process_stack, tmp_path, stack_env(), queues="live", name="people", concurrency=1))

    batch = start(client, project, task, list(range(100, 112)))
    wait_for(lambda: Episode.objects.filter(pk__in=batch, status=EpisodeStatus.RUNNING).exists(), 120,
             what="the batch to start")
    [supervised] = start(client, project, task, [5], mode="supervised")
    wait_for(lambda: Episode.objects.get(pk=supervised).pending_index == 0, 120,
             what="the supervised episode's first proposal")
    waiting = Episode.objects.filter(pk__in=batch, status=EpisodeStatus.QUEUED).count()
    assert waiting >= 6, f"only {waiting} of the batch were still queued: this proved nothing"

    last = Episode.objects.get(pk=batch[-1])
    if last.status == EpisodeStatus.QUEUED:
        detail = client.get(f"/api/v1/episodes/{last.pk}/").json()
        assert detail["queue"]["lane"] == "machines" and 1 <= detail["queue"]["ahead"] <= len(batch) - 1
    assert client.get(f"/api/v1/episodes/{supervised}/").json()["queue"] is None  # running: not waiting


def test_a_queued_episode_counts_those_queued_before_it_in_its_lane_only():
    project = make_project()
    task = make_task(project)

    def episode(mode, status=EpisodeStatus.QUEUED):
        return Episode.objects.create(project=project, task=task, seed=1, mode=mode, status=status)

    episode("supervised", EpisodeStatus.RUNNING)
    first_person = episode("supervised")
    machines = [episode("autonomous") for _ in range(3)]
    second_person = episode("supervised")
    episode("autonomous", EpisodeStatus.FINISHED)
    assert selectors.episode_queue_position(first_person) == {"lane": "people", "ahead": 0, "running": 1}
    assert selectors.episode_queue_position(second_person) == {"lane": "people", "ahead": 1, "running": 1}
    assert selectors.episode_queue_position(machines[2]) == {"lane": "machines", "ahead": 2, "running": 0}
    assert selectors.episode_queue_position(Episode.objects.filter(status=EpisodeStatus.RUNNING).first()) is None
