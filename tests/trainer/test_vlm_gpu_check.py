"""bench/gpu_check.py, the GPU check of the VLM path, on a CPU: its dry run (every launch planned for two GPUs, each
trainer command parsed by the trainer's own parser) and its vLLM check against a stand-in server.

vLLM cannot run here (no GPU, and it never goes into Loupe's venv), so the vLLM check talks to a fake
``vllm.entrypoints.openai.api_server`` module put first on PYTHONPATH: it answers the endpoints the check uses with
the fields vLLM's API documents (``LoadLoRAAdapterRequest``: exactly ``lora_name`` and ``lora_path``; OpenAI chat
completions with ``logprobs.content[0].top_logprobs``), refuses anything else with vLLM's 400/404, and gives an
adapter's answers other log-probabilities than the base's only when it was loaded by that name."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import gpu_check

ROOT = Path(__file__).resolve().parents[2]

FAKE_VLLM = '''
import argparse, json, os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--model"); parser.add_argument("--served-model-name"); parser.add_argument("--port", type=int)
parser.add_argument("--enable-lora", action="store_true"); parser.add_argument("--max-lora-rank")
parser.add_argument("--max-model-len"); parser.add_argument("--limit-mm-per-prompt")
parser.add_argument("--gpu-memory-utilization"); parser.add_argument("--enforce-eager", action="store_true")
args = parser.parse_args()
assert os.environ.get("VLLM_ALLOW_RUNTIME_LORA_UPDATING") == "True" and args.enable_lora
assert os.path.isfile(os.path.join(args.model, "config.json"))
adapters = {}

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        if self.path == "/health":
            return self.answer(200, {})
        if self.path == "/v1/models":
            return self.answer(200, {"object": "list", "data": [{"id": m} for m in [args.served_model_name, *adapters]]})
        self.answer(404, {"detail": "Not Found"})
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/v1/load_lora_adapter":
            if sorted(body) != ["lora_name", "lora_path"]:
                return self.answer(400, {"error": {"message": f"fields {sorted(body)}", "code": 400}})
            if not os.path.isfile(os.path.join(body["lora_path"], "adapter_config.json")):
                return self.answer(400, {"error": {"message": "no adapter_config.json", "code": 400}})
            adapters[body["lora_name"]] = body["lora_path"]
            return self.answer(200, "Success: LoRA adapter 'x' added successfully.")
        if self.path == "/v1/chat/completions":
            model = body["model"]
            if model not in (args.served_model_name, *adapters):
                return self.answer(404, {"error": {"message": f"The model `{model}` does not exist.", "code": 404}})
            image = body["messages"][-1]["content"][1]
            assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/png;base64,")
            shift = 0.5 if model in adapters else 0.0
            top = [{"token": t, "logprob": -1.0 - i - shift, "bytes": None} for i, t in enumerate("Tab")]
            return self.answer(200, {"object": "chat.completion", "model": model, "choices": [{"index": 0,
                "message": {"role": "assistant", "content": "T"}, "finish_reason": "length",
                "logprobs": {"content": [{"token": "T", "logprob": -1.0 - shift, "bytes": None,
                                          "top_logprobs": top[:body["top_logprobs"]]}]}}]})
        self.answer(404, {"detail": "Not Found"})

HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
'''


def test_the_dry_run_plans_every_launch_and_parses_every_trainer_command(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report == json.loads((tmp_path / "gpu_check.json").read_text()) and report["dry_run"] is True
    planned = {(e["algorithm"], e["launch"]) for e in report["train"]}
    assert planned == {(a, launch) for a in ("sft", "dpo", "grpo")
                       for launch in ("1 process", "torchrun 2", "fsdp2 2", "zero3 2")} | {("sft-lora", "1 process")}
    for entry in report["train"]:
        if "skipped" in entry:  # this machine has no deepspeed
            assert entry["launch"] == "zero3 2" and "deepspeed" in entry["skipped"]
        else:
            assert " -m trainer " in entry["command"] and "ok" not in entry  # planned, not run
    assert report["vllm"] == {"skipped": "no --vllm-python (vLLM's own environment)"}


def test_a_machine_without_two_gpus_says_which_launches_it_skipped():
    names = {launch["name"]: launch["skipped"] for launch in gpu_check.launches(gpus=1, deepspeed=True)}
    assert names == {"1 process": None, "torchrun 2": "needs 2 GPUs, this machine has 1",
                     "fsdp2 2": "needs 2 GPUs, this machine has 1", "zero3 2": "needs 2 GPUs, this machine has 1"}
    assert gpu_check.launches(gpus=2, deepspeed=False)[3]["skipped"].startswith("deepspeed is not installed")


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch) -> Path:
    package = tmp_path / "fake" / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for folder in (package, package.parent, package.parent.parent):
        (folder / "__init__.py").write_text("")
    (package / "api_server.py").write_text(FAKE_VLLM)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    return tmp_path


def test_the_vllm_check_loads_the_adapter_by_name_and_compares_its_logits_with_the_base(fake_vllm):
    data = gpu_check.make_data(fake_vllm / "data")
    adapter = fake_vllm / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    figures = gpu_check.vllm_check(sys.executable, data["vlm"], adapter, port=_free_port())
    assert figures["ok"] is True and figures["logits_differ"] is True, figures
    assert figures["load_adapter"] == 200 and figures["models"] == ["loupe-check", "tiny-vlm"]
    assert figures["base_top_logprobs"] == {"T": -1.0, "a": -2.0, "b": -3.0}
    # an adapter dir vLLM cannot read is the check's error, with vLLM's answer
    figures = gpu_check.vllm_check(sys.executable, data["vlm"], fake_vllm / "missing", port=_free_port())
    assert figures["ok"] is False and figures["error"].startswith("load_lora_adapter: 400")


def test_logits_that_do_not_move_fail_the_check():
    same = {"T": -1.0, "a": -2.0}
    assert not gpu_check.logits_differ(same, dict(same))
    assert gpu_check.logits_differ(same, {"T": -1.0, "a": -2.01})
    assert gpu_check.logits_differ(same, {"T": -1.0, "c": -2.0})


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_template_check_says_which_real_checkpoints_trl_can_mark(tmp_path):
    """--templates DIR ...: on a machine that has the real checkpoints downloaded, whether TRL marks each one's chat
    template for answer-only loss; one it cannot fails the check with the reason."""
    from trainer.tiny_vlm import save_tiny_vlm

    fixture = (ROOT / "tests" / "trainer" / "fixtures" / "qwen2_5_vl_7b_instruct.chat_template.jinja").read_text()
    qwen = save_tiny_vlm(tmp_path / "qwen25-vl")
    (qwen / "chat_template.jinja").write_text(fixture)
    edited = save_tiny_vlm(tmp_path / "edited")
    (edited / "chat_template.jinja").write_text(fixture.replace("You are a helpful assistant.", "You are a GUI agent."))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--dry-run", "--out",
                           str(tmp_path / "out"), "--templates", str(qwen), str(edited)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]
    templates = json.loads(proc.stdout)["templates"]
    assert templates[0] == {"dir": str(qwen), "trl_marks": True}
    assert templates[1]["trl_marks"] is False and "not one TRL knows how to mark" in templates[1]["error"]
