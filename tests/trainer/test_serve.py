"""`python -m trainer serve` answers agent's OpenAIPolicy and switches checkpoints without a restart."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch

from trainer.model import load, save_checkpoint, save_tiny_untrained

ROOT = Path(__file__).resolve().parents[2]
MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": 'Instruction: Click on the "OK" button.'}]


def _post(url: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    a = save_tiny_untrained(root / "a", seed=0)
    b = save_tiny_untrained(root / "b", seed=1)
    # a PEFT adapter on top of a, with non-zero weights so that it changes the outputs
    loaded = load(str(a), lora="r=4")
    torch.manual_seed(5)
    with torch.no_grad():
        for name, param in loaded.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    save_checkpoint(loaded, root / "c", algorithm="test", config={}, data_sha256=None, metrics={})
    return a, b, root / "c"


@pytest.fixture(scope="module")
def server(checkpoints):
    a, _, _ = checkpoints
    proc = subprocess.Popen([sys.executable, "-m", "trainer", "serve", "--init", str(a), "--port", "0", "--name", "v0",
                             "--max-new-tokens", "12"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line, "server exited before listening"
        yield json.loads(line)["serving"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_answers_openai_policy_and_switches_checkpoints(server, checkpoints):
    from agent.policies.local import LocalPolicy
    from agent.policies.openai_compat import OpenAIPolicy

    a, b, c = checkpoints
    base = server.removesuffix("/v1")
    remote = OpenAIPolicy(server, "v0", max_tokens=12).act(MESSAGES)
    local = LocalPolicy(a, max_new_tokens=12).act(MESSAGES)
    assert remote.error is None, remote.error
    assert remote.text == local.text
    assert remote.token_logprobs == pytest.approx(local.token_logprobs, abs=1e-4)

    status, text = _post(f"{base}/v1/load_lora_adapter", {"lora_name": "v1", "lora_path": str(b)})
    assert status == 200, text
    switched = OpenAIPolicy(server, "v1", max_tokens=12).act(MESSAGES)
    assert switched.text == LocalPolicy(b, max_new_tokens=12).act(MESSAGES).text
    assert switched.text != remote.text  # a different checkpoint answers, same process

    status, text = _post(f"{base}/v1/load_lora_adapter", {"lora_name": "v2", "lora_path": str(c / "adapter")})
    assert status == 200, text
    adapted = OpenAIPolicy(server, "v2", max_tokens=12).act(MESSAGES)
    assert adapted.text == LocalPolicy(c, max_new_tokens=12).act(MESSAGES).text

    with urllib.request.urlopen(f"{server}/models", timeout=30) as response:
        names = {m["id"] for m in json.load(response)["data"]}
    assert names == {"v0", "v1", "v2"}

    status, _ = _post(f"{base}/v1/unload_lora_adapter", {"lora_name": "v1"})
    assert status == 200
    status, text = _post(f"{base}/v1/chat/completions", {"model": "v1", "messages": MESSAGES})
    assert status == 404 and "v1" in json.loads(text)["error"]["message"]


def test_serve_returns_openai_shaped_errors(server):
    base = server.removesuffix("/v1")
    status, text = _post(f"{base}/v1/chat/completions", {"messages": "hello"})
    assert status == 400 and "messages" in json.loads(text)["error"]["message"]
    status, text = _post(f"{base}/v1/load_lora_adapter", {"lora_name": "x", "lora_path": "/nonexistent"})
    assert status == 400 and "neither a checkpoint" in json.loads(text)["error"]["message"]
    status, text = _post(f"{base}/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "logprobs": True})
    reply = json.loads(text)
    assert status == 200 and len(reply["choices"][0]["logprobs"]["content"]) == reply["usage"]["completion_tokens"]
    assert all(entry["logprob"] <= 0 for entry in reply["choices"][0]["logprobs"]["content"])
