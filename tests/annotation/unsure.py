"""An autonomous episode served by a policy server the test runs, answering OpenAI-format logprobs: its first proposal
of an episode is unsure (its action tokens' probability 0.31), the rest sure (0.95). The project asks a person below
0.5, and a worker (live and rollouts lanes) runs it."""
import json
import math

import pytest

from rollouts import asking
from projects import project_settings
from tests.stack import ChatModel, served_episode_stack

EMPTY_SPOT = "click(x=3, y=207)"  # a corner of the task area with nothing on it
UNSURE, SURE = 0.31, 0.95
FLOOR = 0.5


class UnsureModel(ChatModel):
    """Clicks an empty spot; unsure on an episode's first turn, sure afterwards (as its logprobs say)."""

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        first = not any(m["role"] == "assistant" for m in body["messages"])
        p = UNSURE if first else SURE
        tokens = [("Thought: the corner.\n", math.log(0.2)), ("Action: ", math.log(p)), (EMPTY_SPOT, math.log(p))]
        content = [{"token": t, "logprob": lp, "top_logprobs": [{"token": t, "logprob": lp}]} for t, lp in tokens]
        reply = json.dumps({"model": body["model"], "choices": [{
            "message": {"role": "assistant", "content": "".join(t for t, _ in tokens)},
            "logprobs": {"content": content}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply.encode())


@pytest.fixture
def unsure_stack(tmp_path):
    with served_episode_stack(tmp_path, UnsureModel, idle_seconds=120, max_steps=3, checkpoint="unsure") as made:
        project = made[1]
        project_settings.section_set(section=asking.ASK_SECTION, project=project, actor=None,
                                     changes={"ask_below": FLOOR})
        yield made
