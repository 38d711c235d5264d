"""A proposal's confidence from its own token logprobs: the action tokens' mean (as a probability) and the margin to
the runner-up, from the local policy, `python -m trainer serve`, and a server answering recorded top_logprobs."""
from __future__ import annotations

import json
import math
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.confidence import action_start, confidence_of
from agent.policies import make_policy
from tests.stack import trainer_start

MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": 'Instruction: Click on the "OK" button.'}]


def test_only_the_action_tokens_count_and_the_score_is_their_geometric_mean():
    text = "Thought: hm\nAction: click(x=1, y=2)"
    # tokens: "Thought: hm\n" (ends 12), "Action: " (20), "click(x=1, y=2)" (35)
    conf = confidence_of(text, [-5.0, -0.2, -0.4], [12, 20, 35])
    assert action_start(text) == 12
    assert conf.tokens == 2 and conf.mean_logprob == pytest.approx(-0.3)
    assert conf.score == pytest.approx(math.exp(-0.3)) and conf.margin is None


def test_margin_is_to_the_runner_up_whether_or_not_the_chosen_token_was_the_top_one():
    text = "Action: wait()"
    # token 0 was the top choice (runner-up -2.0: margin 1.5); token 1 was sampled below the top (-0.1: margin -0.9)
    conf = confidence_of(text, [-0.5, -1.0], [8, 14], [[-0.5, -2.0], [-0.1, -1.0]])
    assert conf.margin == pytest.approx((1.5 + -0.9) / 2)


def test_no_logprobs_or_unknown_token_places_give_no_confidence():
    assert confidence_of("Action: wait()", [], []) is None
    assert confidence_of("Thought: x\nAction: wait()", [-0.1, -0.2], []) is None  # which tokens are the action's?
    assert confidence_of("wait()", [-0.1, -0.3], []).mean_logprob == pytest.approx(-0.2)  # no thought: all of it


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from trainer.model import save_tiny_untrained

    return save_tiny_untrained(tmp_path_factory.mktemp("conf") / "a", seed=0)


def test_local_policy_scores_its_answer_from_the_logprobs_it_recorded(checkpoint):
    policy = make_policy("local", checkpoint_dir=checkpoint, max_new_tokens=12)
    out = policy.act(MESSAGES)
    assert out.error is None and len(out.token_ends) == len(out.token_logprobs) == len(out.top_logprobs) > 0
    conf = out.confidence()
    start = action_start(out.text)
    picked = [lp for lp, end in zip(out.token_logprobs, out.token_ends) if end > start] if start else out.token_logprobs
    assert conf.mean_logprob == pytest.approx(sum(picked) / len(picked))
    assert 0 < conf.score <= 1 and conf.margin >= 0  # greedy: the chosen token is the top one, never below the next


def test_openai_policy_scores_the_answer_of_trainer_serve_like_the_local_policy(checkpoint):
    with open(os.devnull, "w") as devnull:
        proc = trainer_start("serve", "--init", str(checkpoint), "--port", "0", "--name", "v0", "--max-new-tokens", "12",
                             stderr=devnull)
    try:
        line = proc.stdout.readline()
        assert line, "trainer serve exited before listening"
        served = make_policy("openai", base_url=json.loads(line)["serving"], model="v0", max_tokens=12).act(MESSAGES)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    local = make_policy("local", checkpoint_dir=checkpoint, max_new_tokens=12).act(MESSAGES)
    assert served.error is None and served.text == local.text
    assert served.confidence().score == pytest.approx(local.confidence().score, rel=1e-3)


class _Recorded(BaseHTTPRequestHandler):
    """An OpenAI-compatible server answering a recorded reply with per-token top_logprobs (as vLLM does)."""

    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        tokens = [("Thought: ok\n", -2.0, [-2.0, -0.3]), ("Action:", -0.1, [-0.1, -3.1]),
                  (" wait()", -0.2, [-0.2, -1.2])]
        content = [{"token": t, "logprob": lp, "top_logprobs": [{"token": f"t{i}", "logprob": v}
                                                                for i, v in enumerate(top)]} for t, lp, top in tokens]
        data = json.dumps({"model": "m", "choices": [{"message": {"content": "".join(t for t, _, _ in tokens)},
                                                      "logprobs": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_policy_asks_for_top_logprobs_and_reads_the_margin():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorded)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        out = make_policy("openai", base_url=f"http://127.0.0.1:{httpd.server_address[1]}", model="m").act(MESSAGES)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _Recorded.bodies[-1]["logprobs"] is True and _Recorded.bodies[-1]["top_logprobs"] == 2
    conf = out.confidence()
    assert conf.tokens == 2 and conf.mean_logprob == pytest.approx(-0.15)
    assert conf.margin == pytest.approx((3.0 + 1.0) / 2)
