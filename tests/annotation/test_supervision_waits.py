"""A supervised episode waits for people: the model's call_user pauses it until someone answers, and an
episode nobody attends ends `interrupted` after the idle timeout with every step kept.

Its own module: the worker here has a short idle timeout and talks to a policy server the test runs (an
OpenAI-compatible endpoint that asks the user first, then clicks), so no module-wide worker competes."""
import json
import time

import pytest

from annotation.models import Command, Intervention
from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus, Step
from tests.annotation.asking import IDLE_SECONDS, AskingModel, asking_stack  # noqa: F401
from tests.annotation.test_live_session import EMPTY_SPOT, Session
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

def test_call_user_pauses_the_episode_and_the_answer_reaches_the_model(asking_stack):
    base, project, task, annotator = asking_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[3], mode="supervised", actor=annotator)[0].pk
    s = Session(base, episode_id, "asked")
    asked = s.wait_type("step.proposed", index=0)["data"]
    assert asked["action"]["name"] == "call_user" and asked["reason"] == "call_user"
    # the worker pauses the episode, then shows the question
    assert [m["data"]["status"] for m in s.seen if m["type"] == "episode.state"][-1] == "paused"
    assert Episode.objects.get(pk=episode_id).status == EpisodeStatus.PAUSED

    too_long = s.ack(s.send("approve", index=0, answer="x" * 5000))
    assert too_long["type"] == "error" and "answer" in too_long["data"]["message"]
    assert s.ack(s.send("approve", index=0, answer="The blue one, on the left."))["type"] == "ack"
    s.wait_type("step.executed", index=0)
    s.wait_type("step.proposed", index=1)
    s.send("approve", index=1)
    s.wait_type("step.executed", index=1)
    s.wait_type("step.proposed", index=2)
    s.send("finish", outcome="failure")
    s.wait_type("episode.finished")

    second_prompt = json.dumps(AskingModel.prompts[1])
    assert "The user answered: The blue one, on the left." in second_prompt
    step = Step.objects.get(episode_id=episode_id, index=0)
    assert step.action["name"] == "call_user" and step.actor == "model"
    assert Step.objects.get(episode_id=episode_id, index=1).prompt == AskingModel.prompts[1]
    approve = Command.objects.get(episode_id=episode_id, type="approve", status="applied", step_index=0)
    assert approve.payload["answer"] == "The blue one, on the left."  # stored with the person's command


def test_unattended_supervised_episode_ends_interrupted_after_the_idle_timeout(asking_stack):
    base, project, task, annotator = asking_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[4], mode="supervised", actor=annotator)[0].pk
    s = Session(base, episode_id, "asked")
    s.wait_type("step.proposed", index=0)
    s.send("edit", index=0, action=EMPTY_SPOT, thought="I click the corner.")
    s.wait_type("step.executed", index=0)
    s.wait_type("step.proposed", index=1)
    s.ws.close()  # the annotator leaves; nobody else comes
    left = time.monotonic()

    wait_for(lambda: Episode.objects.get(pk=episode_id).status == EpisodeStatus.INTERRUPTED, IDLE_SECONDS + 60,
             interval=0.5, what="the idle timeout")
    waited = time.monotonic() - left
    episode = Episode.objects.get(pk=episode_id)
    assert waited >= IDLE_SECONDS - 1, waited
    assert f"no annotator acted for {IDLE_SECONDS} s" in episode.end_reason
    assert list(Step.objects.filter(episode_id=episode_id).values_list("actor", "action_text")) == [("edited", EMPTY_SPOT)]
    assert list(Intervention.objects.filter(episode_id=episode_id).values_list("kind", flat=True)) == ["edit"]

