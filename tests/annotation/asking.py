"""A supervised episode served by a policy server the test runs: it asks the user (call_user) on its
first turn of an episode and clicks an empty spot afterwards. The worker has a short idle timeout."""
import json
from http.server import BaseHTTPRequestHandler

import pytest

from tests.factories import make_member, make_project, make_task, make_user
from tests.stack import (ProcessStack, deploy_served_checkpoint, stack_env, start_daphne, start_policy_server,
                         start_worker)

EMPTY_SPOT = "click(x=3, y=207)"  # a corner of the task area with nothing on it
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
    server = start_policy_server(AskingModel)
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_SUPERVISED_IDLE_SECONDS=IDLE_SECONDS,
                    LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        base = start_daphne(stack, tmp_path, env)
        start_worker(stack, tmp_path, env, queues="live,rollouts")
        project = make_project()
        annotator = make_user("asked")
        make_member(project, annotator)
        task = make_task(project, "click-button", max_steps=6)
        deploy_served_checkpoint(project, tmp_path, "asker")  # what the policy server "serves"
        yield base, project, task, annotator
    finally:
        stack.stop()
        server.shutdown()


