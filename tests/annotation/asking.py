"""A supervised episode served by a policy server the test runs: it asks the user (call_user) on its
first turn of an episode and clicks an empty spot afterwards. The worker has a short idle timeout."""
import pytest

from tests.factories import make_member, make_project, make_task, make_user
from tests.stack import (ChatModel, ProcessStack, deploy_served_checkpoint, stack_env, start_daphne, start_policy_server,
                         start_worker)

EMPTY_SPOT = "click(x=3, y=207)"  # a corner of the task area with nothing on it
IDLE_SECONDS = 6
QUESTION = "Which of the buttons do you mean?"


class AskingModel(ChatModel):
    """A policy server: asks the user on its first turn of an episode, clicks an empty spot afterwards."""

    prompts: list[list[dict]] = []

    def answer(self, body: dict) -> str:
        self.prompts.append(body["messages"])
        asked = any("call_user" in str(m.get("content")) for m in body["messages"] if m["role"] == "assistant")
        return ("Thought: I clicked.\nAction: " + EMPTY_SPOT) if asked else \
            f'Thought: I am not sure.\nAction: call_user(question="{QUESTION}")'


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


