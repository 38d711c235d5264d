"""A policy server that is slow, talks garbage or is down: each episode ends with the reason stored and
shown, the void turns kept as steps, and the same rollout worker goes on to the next episode.

Its own module: the worker here talks to a policy server the test runs, with a one-second timeout."""
import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus, Step
from tests.factories import make_member, make_project, make_task, make_user
from tests.stack import ProcessStack, deploy_served_checkpoint, stack_env, start_policy_server, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


class Model(BaseHTTPRequestHandler):
    """An OpenAI-compatible policy server whose behaviour the test switches: slow, garbage."""

    mode = "slow"

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if Model.mode == "slow":
            time.sleep(3)  # past the worker's one-second timeout
        text = "I would rather not say what I do next." if Model.mode == "garbage" else \
            "Thought: a corner.\nAction: click(x=3, y=207)"
        reply = json.dumps({"model": body["model"], "choices": [{"message": {"role": "assistant", "content": text}}]})
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(reply.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting: that is the point

    def log_message(self, *args):
        pass


@pytest.fixture
def bad_policy_stack(tmp_path):
    server = start_policy_server(Model)
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}",
                    LOUPE_OPENAI_TIMEOUT_SECONDS=1, LOUPE_OPENAI_RETRIES=1)
    try:
        start_worker(stack, tmp_path, env, queues="live,rollouts")
        project = make_project()
        manager = make_user("runs-batches")
        make_member(project, manager, role="manager")
        task = make_task(project, "click-button", max_steps=4)
        deploy_served_checkpoint(project, tmp_path, "served")
        yield project, task, manager, server
    finally:
        stack.stop()
        server.shutdown()


def _run(project, task, manager, seed) -> Episode:
    episode = episodes.episodes_start(project=project, task=task, seeds=[seed], mode="autonomous", actor=manager)[0]
    wait_for(lambda: Episode.objects.get(pk=episode.pk).status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED),
             timeout=90, what=f"episode {episode.pk} to end")
    return Episode.objects.get(pk=episode.pk)


def test_slow_garbage_and_down_policy_servers_end_episodes_with_their_reason(bad_policy_stack):
    project, task, manager, server = bad_policy_stack

    Model.mode = "slow"
    slow = _run(project, task, manager, 1)
    assert slow.status == EpisodeStatus.FAILED
    assert slow.end_reason.startswith("policy_error") and "did not answer within 1.0 s" in slow.end_reason
    assert "after 2 attempts" in slow.end_reason

    Model.mode = "garbage"  # the same worker takes the next episode: it was not stuck
    garbage = _run(project, task, manager, 2)
    assert garbage.status == EpisodeStatus.FINISHED and garbage.end_reason == "void_turns: the task's check did not run"
    assert garbage.env_reward is None  # none, not the loop's 0.0: no check paid it
    voids = list(Step.objects.filter(episode=garbage).order_by("index"))
    assert voids and all(s.void and s.action is None and "Action" in s.void_reason for s in voids)
    assert voids[0].raw_output == "I would rather not say what I do next."  # what the model said is kept
    assert garbage.n_void == len(voids)

    server.shutdown()
    server.server_close()
    down = _run(project, task, manager, 3)
    assert down.status == EpisodeStatus.FAILED
    assert down.end_reason.startswith("policy_error") and "cannot reach the policy server" in down.end_reason
