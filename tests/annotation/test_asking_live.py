"""An autonomous episode asks a person when its policy is unsure, over the real WebSocket (daphne) with a real
rollout worker: it pauses before executing, waits in the person queue with its reason, runs on alone after a
person's approval, and its steps keep the confidence the policy server's logprobs gave."""
import pytest
from rest_framework.test import APIClient

from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus, Step
from tests.annotation.test_live_session import Session
from tests.annotation.unsure import EMPTY_SPOT, SURE, UNSURE, unsure_stack  # noqa: F401
from tests.factories import PASSWORD
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_unsure_proposal_waits_for_a_person_and_the_episode_runs_on_after_approval(unsure_stack):
    base, project, task, annotator = unsure_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[5], mode="autonomous",
                                         actor=annotator)[0].pk
    client = APIClient()
    client.login(username="asked", password=PASSWORD)

    def queue():
        return client.get(f"/api/v1/projects/{project.pk}/asks").json()

    wait_for(lambda: queue(), 180, what="the episode in the person queue")
    assert [(a["episode"], a["reason"], a["step"]) for a in queue()] == [(episode_id, "confidence 0.31 < 0.5", 0)]
    assert Episode.objects.get(pk=episode_id).status == EpisodeStatus.PAUSED
    assert not Step.objects.filter(episode_id=episode_id).exists()  # paused before executing

    s = Session(base, episode_id, "asked")
    proposed = s.wait_type("step.proposed", index=0)["data"]
    assert proposed["reason"] == "unsure" and proposed["confidence"] == pytest.approx(UNSURE, abs=1e-3)
    assert proposed["action_text"] == EMPTY_SPOT
    assert s.ack(s.send("approve", index=0))["type"] == "ack"
    s.wait(lambda m: m["type"] == "episode.finished", "the episode's end", 180)  # steps 1 and 2 were sure: not asked
    s.ws.close()

    episode = Episode.objects.get(pk=episode_id)
    assert episode.status == EpisodeStatus.FINISHED and episode.asked_at is None and queue() == []
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.actor for s in steps] == ["model", "model", "model"]
    assert [round(s.confidence, 3) for s in steps] == [UNSURE, SURE, SURE]
    assert steps[0].info["asked"] == "confidence 0.31 < 0.5" and "asked" not in steps[1].info
