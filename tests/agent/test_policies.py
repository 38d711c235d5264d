"""Both policy backends: a tiny random local Llama, and an OpenAI-shaped HTTP server we start."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent.actions import parse_turn
from agent.policies import PolicyError, make_policy
from agent.policies.local import LocalPolicy, action_complete, messages_as_text
from agent.policies.openai_compat import OpenAIPolicy

MESSAGES = [
    {"role": "system", "content": "You act."},
    {"role": "user", "content": [{"type": "text", "text": "Instruction: click"},
                                 {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]},
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _save_tiny_checkpoint(path, seed: int, zero_head: bool = False):
    """A tiny random LlamaForCausalLM with a byte-level tokenizer whose EOS is id 0."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["</s>", "<s>", "<unk>", "<pad>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for ch in pre_tokenizers.ByteLevel.alphabet():
        vocab.setdefault(ch, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", bos_token="<s>",
                                        unk_token="<unk>", pad_token="<pad>")
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         eos_token_id=0, bos_token_id=1, pad_token_id=3, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    if zero_head:
        with torch.no_grad():
            model.lm_head.weight.zero_()  # uniform logits: greedy picks id 0, the EOS
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    return {
        "a": _save_tiny_checkpoint(root / "a", seed=1),
        "b": _save_tiny_checkpoint(root / "b", seed=2),
        "eos": _save_tiny_checkpoint(root / "eos", seed=3, zero_head=True),
    }


def test_local_greedy_is_deterministic_and_logprobs_match_a_full_forward(checkpoints):
    import torch

    policy = make_policy("local", checkpoint_dir=checkpoints["a"], max_new_tokens=12, stop_at_action=False)
    first, second = policy.act(MESSAGES), policy.act(MESSAGES)
    assert first.error is None and first.text == second.text and first.token_ids == second.token_ids
    assert 0 < len(first.token_ids) == len(first.token_logprobs) <= 12
    assert all(lp <= 0 for lp in first.token_logprobs) and first.latency_ms > 0
    assert first.model == str(checkpoints["a"])
    # Teacher-forced recomputation of the same tokens gives the same logprobs (what RL relies on).
    prompt = policy.prompt_ids(MESSAGES)
    with torch.no_grad():
        logits = policy.model(input_ids=torch.tensor([prompt + first.token_ids])).logits[0]
    logp = torch.log_softmax(logits.float(), dim=-1)
    recomputed = [float(logp[len(prompt) - 1 + i, tok]) for i, tok in enumerate(first.token_ids)]
    assert recomputed == pytest.approx(first.token_logprobs, abs=1e-4)


def test_local_prompt_strips_images_to_text(checkpoints):
    policy = LocalPolicy(checkpoints["a"], max_new_tokens=1)
    text = policy.tokenizer.decode(policy.prompt_ids(MESSAGES))
    assert "Instruction: click" in text and "base64" not in text and text.endswith("<|assistant|>\n")
    assert messages_as_text(MESSAGES)[1] == {"role": "user", "content": "Instruction: click"}


def test_local_sampling_with_a_seed_is_reproducible(checkpoints):
    one = LocalPolicy(checkpoints["a"], temperature=1.0, max_new_tokens=16, seed=7, stop_at_action=False)
    two = LocalPolicy(checkpoints["a"], temperature=1.0, max_new_tokens=16, seed=7, stop_at_action=False)
    assert one.act(MESSAGES).token_ids == two.act(MESSAGES).token_ids


def test_local_stops_at_eos_and_keeps_it_in_the_tokens(checkpoints):
    out = LocalPolicy(checkpoints["eos"], max_new_tokens=20).act(MESSAGES)
    assert out.error is None and out.token_ids == [0] and out.text == ""


def test_local_reload_swaps_weights_in_place(checkpoints):
    import math

    policy = LocalPolicy(checkpoints["a"], max_new_tokens=8, stop_at_action=False)
    before = policy.act(MESSAGES)
    model_before = policy.model
    policy.reload(checkpoints["eos"])
    after = policy.act(MESSAGES)
    assert policy.model is not model_before and after.model == str(checkpoints["eos"])
    # The zeroed head gives uniform logits: EOS at once, with logprob -log(vocab size).
    vocab = policy.model.config.vocab_size
    assert after.token_ids == [0] and after.token_logprobs == pytest.approx([-math.log(vocab)], abs=1e-5)
    assert before.token_logprobs[0] != pytest.approx(-math.log(vocab), abs=1e-5)


def test_local_missing_checkpoint_is_a_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="config.json missing"):
        LocalPolicy(tmp_path / "nothing")


def test_action_complete_detects_a_finished_action_line():
    assert not action_complete("Thought: go\nAction: click(x=1, y=2")
    assert action_complete("Thought: go\nAction: click(x=1, y=2)")
    assert not action_complete('Thought: go\nAction: type(text="a)')


# -- openai backend ---------------------------------------------------------------------------
class _Server:
    """An OpenAI-shaped server: ``mode`` is "ok", "flaky" (500 first), "slow" or "bad_request"."""

    def __init__(self, mode: str):
        self.mode, self.requests, self.calls = mode, [], 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.calls += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, dict(self.headers), body))
                if outer.mode == "slow":
                    time.sleep(1.0)
                if outer.mode == "flaky" and outer.calls == 1:
                    return self._send(500, {"error": "warming up"})
                if outer.mode == "bad_request":
                    return self._send(400, {"error": {"message": "model not found"}})
                self._send(200, {
                    "model": body["model"],
                    "choices": [{"message": {"role": "assistant", "content": "Thought: ok\nAction: wait()"},
                                 "logprobs": {"content": [{"token": "token_id:5", "logprob": -0.5},
                                                          {"token": "token_id:9", "logprob": -0.25}]}}],
                })

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(request):
    srv = _Server(request.param)
    yield srv
    srv.close()


@pytest.mark.parametrize("server", ["ok"], indirect=True)
def test_openai_posts_chat_completion_with_images_and_logprobs(server):
    policy = make_policy("openai", base_url=server.url + "/v1", model="tiny", api_key="k", temperature=0.3)
    out = policy.act(MESSAGES)
    assert out.error is None and out.text == "Thought: ok\nAction: wait()"
    assert out.token_ids == [5, 9] and out.token_logprobs == [-0.5, -0.25] and out.model == "tiny"
    path, headers, body = server.requests[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer k"
    assert body["logprobs"] is True and body["temperature"] == 0.3 and body["model"] == "tiny"
    assert body["messages"][1]["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")


@pytest.mark.parametrize("server", ["flaky"], indirect=True)
def test_openai_retries_a_5xx_and_then_succeeds(server):
    out = OpenAIPolicy(server.url, "tiny", retries=2, backoff_s=0.01).act(MESSAGES)
    assert out.error is None and server.calls == 2


@pytest.mark.parametrize("server", ["bad_request"], indirect=True)
def test_openai_does_not_retry_a_4xx_and_reports_it(server):
    out = OpenAIPolicy(server.url, "tiny", retries=3, backoff_s=0.01).act(MESSAGES)
    assert out.text == "" and "HTTP 400" in out.error and "model not found" in out.error and server.calls == 1


@pytest.mark.parametrize("server", ["slow"], indirect=True)
def test_openai_slow_server_times_out_after_retries(server):
    started = time.monotonic()
    out = OpenAIPolicy(server.url, "tiny", timeout=0.2, retries=1, backoff_s=0.01).act(MESSAGES)
    assert out.text == "" and "did not answer within 0.2 s" in out.error and "after 2 attempts" in out.error
    assert time.monotonic() - started < 3


def test_openai_server_down_reports_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    out = OpenAIPolicy(f"http://127.0.0.1:{port}", "tiny", retries=2, backoff_s=0.01).act(MESSAGES)
    assert out.text == "" and "cannot reach the policy server" in out.error and "after 3 attempts" in out.error


def test_make_policy_rejects_unknown_backend():
    with pytest.raises(PolicyError, match="unknown policy backend"):
        make_policy("magic")


@pytest.mark.parametrize("style", ["full", "compact", "named"])
def test_scripted_solves_a_terminal_task_from_the_prompts_alone(style):
    """The scripted backend sees only the prompt: it reads the instruction (each style's prefix) and the terminal's
    text screen back from it, and plays terminal-count to its check (it typed the command again at step 2 when the
    screen was not read back, and the episode ran out of steps)."""
    from agent.envs.terminal import TerminalEnv
    from agent.policies.scripted import ScriptedPolicy, observation_from_prompt
    from agent.prompt import HistoryStep, render_messages, render_observation

    policy, history = ScriptedPolicy("terminal-count"), []
    with TerminalEnv() as env:
        observation = env.reset("terminal-count", 3)
        for _ in range(4):
            text = render_observation(observation, style)
            messages = render_messages(instruction=observation.instruction, observation_text=text, history=history,
                                       style=style)
            read, _ = observation_from_prompt(messages)
            assert read.instruction == observation.instruction and read.screen_text == observation.screen_text
            output = policy.act(messages)
            assert output.error is None
            turn = parse_turn(output.text)
            result = env.step(turn.action)
            history.append(HistoryStep(text, turn))
            observation = result.observation
            if result.done:
                break
        assert result.done and result.reward == 1.0 and len(history) == 2
