"""A supervised episode served by a policy server the test runs: it asks the user (call_user) on its
first turn of an episode and clicks an empty spot afterwards. The worker has a short idle timeout."""
import pytest

from tests.stack import ChatModel, served_episode_stack

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
    with served_episode_stack(tmp_path, AskingModel, idle_seconds=IDLE_SECONDS, max_steps=6,
                              checkpoint="asker") as made:  # the checkpoint the policy server "serves"
        yield made
