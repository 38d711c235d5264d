"""A supervised episode waits for people: the model's call_user pauses it until someone answers, and an
episode nobody attends ends `interrupted` after the idle timeout with every step kept.

Its own module: the worker here has a short idle timeout and talks to a policy server the test runs (an
OpenAI-compatible endpoint that asks the user first, then clicks), so no module-wide worker competes."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from annotation.models import Command, Intervention
from flywheel import services
from flywheel.models import Checkpoint, Episode, EpisodeStatus, Step
from tests.annotation.test_live_session import EMPTY_SPOT, Session
from tests.factories import make_member, make_project, make_task, make_user
from trainer.model import save_tiny_untrained
from tests.stack import ProcessStack, free_port, stack_env, start_daphne, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

IDLE_SECONDS = 6
QUESTION = "Which of the buttons do you mean?"


class AskingModel(BaseHTTPRequestHandler):
    """A policy server: asks the user on its first turn of an episode, clicks an empty spot afterwards."""

    prompts: list[list[dict]] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.prompts.append(body["messages"])
        asked = any("call_user" in str(m.get("content")) for m in body["messages"] if m["role"] == "assistant")
        text = ("Thought: I clicked.\nAction: " + EMPTY_SPOT) if asked else \
            f'Thought: I am not sure.\nAction: call_user(question="{QUESTION}")'
        reply = json.dumps({"model": body["model"], "choices": [{"message": {"role": "assistant", "content": text}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def asking_stack(tmp_path):
    AskingModel.prompts = []
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), AskingModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_SUPERVISED_IDLE_SECONDS=IDLE_SECONDS,
                    LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        base = start_daphne(stack, tmp_path, env)
        start_worker(stack, tmp_path, env, queues="rollouts")
        project = make_project()
        annotator = make_user("asked")
        make_member(project, annotator)
        task = make_task(project, "click-button", max_steps=6)
        # the policy server "serves" this checkpoint; a deployment needs its files to be whole
        checkpoint = Checkpoint.objects.create(project=project, name="asker",
                                               uri=str(save_tiny_untrained(tmp_path / "asker")))
        services.deployment_promote(project=project, checkpoint=checkpoint, backend="openai", served_name="asker")
        yield base, project, task, annotator
    finally:
        stack.stop()
        server.shutdown()


def test_call_user_pauses_the_episode_and_the_answer_reaches_the_model(asking_stack):
    base, project, task, annotator = asking_stack
    episode_id = services.episodes_start(project=project, task=task, seeds=[3], mode="supervised", actor=annotator)[0].pk
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
    episode_id = services.episodes_start(project=project, task=task, seeds=[4], mode="supervised", actor=annotator)[0].pk
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
