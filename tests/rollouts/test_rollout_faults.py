"""Faults during rollouts. Its own module, so no module-wide worker competes for the episode."""
import os
import signal
import time

import pytest

from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus, Step
from rollouts.tasks import episodes_sweep_interrupted
from tests.factories import make_member, make_user
from tests.stack import ProcessStack, stack_env, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_killed_worker_leaves_the_episode_interrupted_and_resumable(rollout_project, tmp_path):
    """A supervised session in progress: the worker dies while the annotator works; nothing they did is lost."""
    from annotation.services import command_submit

    project, task, checkpoint, client = rollout_project
    annotator = make_user()
    make_member(project, annotator)
    stack = ProcessStack([], [])

    def steer(kind: str, **fields) -> None:
        result = command_submit(episode_id=episode_id, user=annotator,
                                frame={"type": kind, "id": f"{kind}-{time.monotonic_ns()}", **fields})
        assert result.ok, result.message

    def proposal_open(index: int) -> bool:
        return Episode.objects.get(pk=episode_id).pending_index == index

    try:
        worker = start_worker(stack, tmp_path, stack_env(), queues="live,rollouts", name="victim")
        episode_id = episodes.episodes_start(project=project, task=task, seeds=[11], mode="supervised",
                                             actor=annotator)[0].pk
        for index in (0, 1):
            wait_for(lambda: proposal_open(index), 300, interval=0.1, what=f"proposal {index}")
            steer("edit", index=index, action=f"click(x={3 + index}, y=207)")
        wait_for(lambda: proposal_open(2), 300, interval=0.1, what="proposal 2")
        os.killpg(worker.pid, signal.SIGKILL)
        kept = list(Step.objects.filter(episode_id=episode_id).order_by("index").values_list("id", "actor"))
        assert [actor for _, actor in kept] == ["edited", "edited"]

        def interrupted():
            episodes_sweep_interrupted.apply()  # the liveness sweep, as beat runs it
            return Episode.objects.get(pk=episode_id).status == EpisodeStatus.INTERRUPTED
        wait_for(interrupted, 30, interval=1, what="the episode to be interrupted")
        start_worker(stack, tmp_path, stack_env(), queues="live,rollouts", name="rescuer")
        response = client.post(f"/api/v1/episodes/{episode_id}/resume")
        assert response.status_code == 202, response.content
        # the new worker replays the two stored steps on the same seed and asks about step 2 again
        wait_for(lambda: proposal_open(2) and Episode.objects.get(pk=episode_id).status == "running", 300,
                 interval=0.2, what="the resumed proposal")
        steer("finish", outcome="failure")
        wait_for(lambda: Episode.objects.get(pk=episode_id).status == EpisodeStatus.FINISHED, 120, what="the end")
    finally:
        stack.stop()
    episode = Episode.objects.get(pk=episode_id)
    assert list(Step.objects.filter(episode=episode).order_by("index").values_list("id", "actor")) == kept
    assert episode.attempt == 2 and episode.outcome == "failure"
