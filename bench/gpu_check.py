"""GPU check of the vision-language path (issue 36): one script a person runs on a GPU machine (sized for 8 minutes).

It makes the tiny random Qwen2.5-VL (trainer/tiny_vlm.py) and rows with screenshots, then runs the real
``python -m trainer`` as a team would on GPUs, and prints one JSON object (also written to ``<out>/gpu_check.json``):

- ``train``: SFT, DPO and GRPO of the tiny VLM with ``--dtype auto`` (bf16 compute on CUDA; a full fine-tune keeps
  float32 weights) in one process, under ``torchrun`` with 2 processes, under ``accelerate launch`` with FSDP2
  (trainer/launch/fsdp.yaml) and with DeepSpeed ZeRO-3 (trainer/launch/zero3.yaml) where deepspeed imports; a launch
  the machine cannot run (one GPU, no deepspeed) is listed with why it was skipped. For each: exit status, seconds,
  steps, first and final loss, the devices the ranks said they trained on (each rank its own GPU), and the error's
  last line when it failed.
- ``vllm``: with ``--vllm-python`` (the python of vLLM's own environment, never Loupe's venv: docker/compose.yaml's
  vllm image, or ``python -m venv /opt/vllm && /opt/vllm/bin/pip install vllm==0.31.0``), vLLM serves the tiny VLM
  from its dir with runtime LoRA, loads the LoRA adapter the one-process SFT with ``--lora`` trained by name
  (``POST /v1/load_lora_adapter``), and answers one image prompt with the base and with the adapter: the first
  token's top log-probabilities must differ (an adapter whose module names vLLM does not map does nothing, silently).

- ``loupe_adapter_check``: trainer/adapters.served_adapter_mismatch of that adapter against the tiny VLM (what the
  flywheel checks before it asks vLLM to load an adapter): '' when it fits, which vLLM's differing logits confirm.
- ``templates``: with ``--templates DIR ...`` (real checkpoint dirs: UI-TARS-1.5-7B, Qwen2.5-VL-7B-Instruct as
  downloaded), whether TRL can mark each one's chat template for answer-only loss (trainer/vlm.check_chat_template),
  and if not, why.

``--dry-run`` (what ``make test`` runs, on a CPU): makes the data, plans every check for a 2-GPU machine, and parses
each trainer command line with the trainer's own parser; nothing trains.

Usage::

    .venv/bin/python bench/gpu_check.py [--out DIR] [--vllm-python /opt/vllm/bin/python] [--templates DIR ...]
        [--dry-run]
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS = 8
COMMON = ["--max-steps", "4", "--log-every", "1", "--lr", "1e-3", "--warmup-steps", "0", "--max-length", "2048",
          "--batch-tokens", "2048", "--seed", "3", "--max-seconds", "90"]
EXTRA = {"sft": [], "dpo": ["--beta", "0.5"],
         "rl": ["--advantage", "grpo", "--group-size", "4", "--max-new-tokens", "20", "--ppo-epochs", "1"]}
ALGORITHMS = {"sft": "sft", "dpo": "dpo", "grpo": "rl"}
TRAIN_SECONDS = 240  # a launch that takes longer than this is stopped and reported
VLLM_READY_SECONDS = 300


def launches(gpus: int, deepspeed: bool) -> list[dict]:
    """The launches to run: each a name, the argv before ``-m trainer`` and, where it cannot run here, why."""
    python = sys.executable
    accelerate = [python, "-m", "accelerate.commands.launch", "--num_processes", "2", "--config_file"]
    two = None if gpus >= 2 else f"needs 2 GPUs, this machine has {gpus}"
    return [
        {"name": "1 process", "argv": [python], "processes": 1, "skipped": None if gpus >= 1 else "no GPU"},
        {"name": "torchrun 2", "argv": [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                                        "2"], "processes": 2, "skipped": two},
        {"name": "fsdp2 2", "argv": [*accelerate, str(ROOT / "trainer" / "launch" / "fsdp.yaml")], "processes": 2,
         "skipped": two},
        {"name": "zero3 2", "argv": [*accelerate, str(ROOT / "trainer" / "launch" / "zero3.yaml")], "processes": 2,
         "skipped": two or (None if deepspeed else "deepspeed is not installed (pip install deepspeed)")},
    ]


def screen(i: int) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (160, 210), "white")
    ImageDraw.Draw(image).rectangle([10 + 12 * i, 40, 50 + 12 * i, 60], fill=(0, 0, 200))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def make_data(folder: Path) -> dict[str, Path]:
    """The tiny VLM's dir and 8 rows each of SFT, DPO and GRPO, one 160x210 screen a row."""
    from trainer.tiny_vlm import save_tiny_vlm

    (folder / "images").mkdir(parents=True, exist_ok=True)
    sft, dpo, rl = [], [], []
    for i in range(ROWS):
        (folder / "images" / f"s{i}.png").write_bytes(screen(i))
        prompt = [{"role": "system", "content": "You operate a web page."},
                  {"role": "user", "content": f"Click button {i}."}]
        click = f"click(x={30 + 12 * i}, y=50)"
        images = [f"images/s{i}.png"]
        sft.append({"messages": [*prompt, {"role": "assistant", "content": f"Action: {click}"}], "images": images})
        dpo.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": f"Action: {click}"}],
                    "rejected": [{"role": "assistant", "content": f"Action: click(x={150 - 12 * i}, y=190)"}],
                    "images": images})
        rl.append({"messages": prompt, "images": images, "format": "loupe", "width": 160, "height": 210,
                   "reward": {"kind": "action", "action": click, "box": [10 + 12 * i, 40, 50 + 12 * i, 60]}})
    paths = {"vlm": save_tiny_vlm(folder / "tiny-vlm")}
    for name, rows in (("sft", sft), ("dpo", dpo), ("rl", rl)):
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(json.dumps(row) + "\n" for row in rows))
    return paths


def trainer_args(command: str, data: dict[str, Path], out: Path, lora: str = "") -> list[str]:
    """``python -m trainer``'s arguments for ``command`` (sft, dpo or rl) on the check's data."""
    return [command, "--init", str(data["vlm"]), "--data", str(data[command]), "--out", str(out), *COMMON,
            *EXTRA[command], *(["--lora", lora] if lora else [])]


def train(launch: dict, args: list[str]) -> dict:
    """Run one launch of the trainer: its figures."""
    started = time.monotonic()
    try:
        proc = subprocess.run([*launch["argv"], "-m", "trainer", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=TRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        return {"ok": False, "seconds": TRAIN_SECONDS, "error": f"stopped after {TRAIN_SECONDS} s"}
    figures: dict = {"ok": proc.returncode == 0, "exit": proc.returncode,
                     "seconds": round(time.monotonic() - started, 1),
                     "devices": sorted(set(re.findall(r"device (cuda:\d+|cuda|cpu)", proc.stderr)))}
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    done = next((line for line in lines if line.get("done")), None)
    if done:
        metrics = done["metrics"]
        figures.update({k: metrics[k] for k in ("steps", "first_loss", "final_loss", "seconds_per_step",
                                                 "train_seconds", "answers", "reward_mean") if k in metrics})
    if proc.returncode:
        figures["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return figures


def _post(url: str, body: dict | None = None, timeout: float = 60) -> tuple[int, dict | str]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()[:500]
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text[:500]


def chat_request(model: str, image: bytes) -> dict:
    """One image prompt as the openai policy posts it (agent/policies/openai_compat.py): the first answer token's
    top log-probabilities, greedy."""
    uri = "data:image/png;base64," + base64.b64encode(image).decode()
    return {"model": model, "max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": 5,
            "messages": [{"role": "system", "content": "You operate a web page."},
                         {"role": "user", "content": [{"type": "text", "text": "Click button 0."},
                                                      {"type": "image_url", "image_url": {"url": uri}}]}]}


def top_logprobs(answer: dict) -> dict[str, float]:
    """The first token's top log-probabilities of a chat completion (OpenAI's ``logprobs.content[0]``)."""
    first = answer["choices"][0]["logprobs"]["content"][0]
    return {entry["token"]: entry["logprob"] for entry in first["top_logprobs"]}


def logits_differ(base: dict[str, float], adapted: dict[str, float], tolerance: float = 1e-3) -> bool:
    return base.keys() != adapted.keys() or any(abs(base[t] - adapted[t]) > tolerance for t in base)


def vllm_check(python: str, vlm: Path, adapter: Path, port: int = 8765) -> dict:
    """vLLM serving the tiny VLM with runtime LoRA: the adapter loaded by name, one image prompt answered by both."""
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(vlm), "--served-model-name",
            "tiny-vlm", "--enable-lora", "--max-lora-rank", "8", "--max-model-len", "4096", "--limit-mm-per-prompt",
            '{"image": 1}', "--gpu-memory-utilization", "0.3", "--enforce-eager", "--port", str(port)]
    base_url = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile(mode="w+")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"})
    started = time.monotonic()
    figures: dict = {"ok": False}
    try:
        while time.monotonic() - started < VLLM_READY_SECONDS:
            if server.poll() is not None:
                log.seek(0)
                figures["error"] = f"vLLM exited {server.returncode}: " + " | ".join(log.read().splitlines()[-3:])
                return figures
            try:
                if _post(base_url + "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(2)
        else:
            figures["error"] = f"vLLM was not ready after {VLLM_READY_SECONDS} s"
            return figures
        figures["seconds_to_ready"] = round(time.monotonic() - started, 1)
        status, answer = _post(base_url + "/v1/load_lora_adapter", {"lora_name": "loupe-check",
                                                                    "lora_path": str(adapter)})
        figures["load_adapter"] = status
        if status != 200:
            figures["error"] = f"load_lora_adapter: {status} {answer}"
            return figures
        _, models = _post(base_url + "/v1/models")
        figures["models"] = sorted(m["id"] for m in models.get("data", [])) if isinstance(models, dict) else models
        tops = {}
        for model in ("tiny-vlm", "loupe-check"):
            status, answer = _post(base_url + "/v1/chat/completions", chat_request(model, screen(0)))
            if status != 200:
                figures["error"] = f"chat completion of {model}: {status} {answer}"
                return figures
            tops[model] = top_logprobs(answer)
        figures.update({"base_top_logprobs": tops["tiny-vlm"], "adapter_top_logprobs": tops["loupe-check"],
                        "logits_differ": logits_differ(tops["tiny-vlm"], tops["loupe-check"])})
        figures["ok"] = figures["logits_differ"]
        return figures
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def template_check(folder: Path) -> dict:
    """Whether TRL marks the checkpoint dir's chat template for answer-only loss (trainer/vlm.check_chat_template)."""
    from trainer.data import TrainerError
    from trainer.tiny_vlm import load_processor
    from trainer.vlm import check_chat_template

    try:
        check_chat_template(load_processor(folder), folder)
    except (TrainerError, OSError, ValueError) as exc:
        return {"dir": str(folder), "trl_marks": False, "error": str(exc)}
    return {"dir": str(folder), "trl_marks": True}


def plan(data: dict[str, Path], out: Path, gpus: int, deepspeed: bool) -> list[dict]:
    """Every training check: algorithm x launch, with its trainer arguments; the LoRA SFT for vLLM last."""
    checks = [{"algorithm": algorithm, "launch": launch, "args": trainer_args(command, data, out / algorithm /
                                                                              launch["name"].replace(" ", "-"))}
              for algorithm, command in ALGORITHMS.items() for launch in launches(gpus, deepspeed)]
    checks.append({"algorithm": "sft-lora", "launch": launches(gpus, deepspeed)[0],
                   "args": trainer_args("sft", data, out / "sft-lora", lora="r=8")})
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="dir for the data, checkpoints and gpu_check.json (a temp dir)")
    parser.add_argument("--vllm-python", default=None, help="python of vLLM's own environment; without: no vllm check")
    parser.add_argument("--dry-run", action="store_true", help="plan and parse every command; train nothing")
    parser.add_argument("--templates", nargs="*", default=[], metavar="DIR",
                        help="checkpoint dirs whose chat templates to check for answer-only loss (UI-TARS-1.5-7B...)")
    options = parser.parse_args(argv)
    out = Path(options.out or tempfile.mkdtemp(prefix="loupe-gpu-check-"))
    data = make_data(out / "data")
    import torch

    deepspeed = importlib.util.find_spec("deepspeed") is not None
    gpus = 2 if options.dry_run else torch.cuda.device_count()
    report: dict = {"dry_run": options.dry_run, "gpus": gpus, "deepspeed": deepspeed, "torch": torch.__version__,
                    "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                    "train": [], "vllm": None}
    started = time.monotonic()
    for check in plan(data, out, gpus, deepspeed):
        launch = check["launch"]
        entry = {"algorithm": check["algorithm"], "launch": launch["name"], "processes": launch["processes"]}
        if launch["skipped"]:
            entry["skipped"] = launch["skipped"]
        elif options.dry_run:
            from trainer.cli import build_parser

            build_parser().parse_args(check["args"])  # exits 2 on an argument the trainer does not take
            for part in launch["argv"]:
                if part.endswith(".yaml") and not Path(part).is_file():
                    raise SystemExit(f"{part}: no such launch config")
            entry["command"] = " ".join([*launch["argv"], "-m", "trainer", *check["args"]])
        else:
            entry.update(train(launch, check["args"]))
        report["train"].append(entry)
        print(json.dumps(entry), file=sys.stderr)
    adapter = out / "sft-lora" / "adapter"
    if options.vllm_python and not options.dry_run:
        report["vllm"] = (vllm_check(options.vllm_python, data["vlm"], adapter) if adapter.is_dir()
                          else {"ok": False, "error": "the LoRA SFT wrote no adapter"})
        if adapter.is_dir():
            from trainer.adapters import served_adapter_mismatch

            report["vllm"]["loupe_adapter_check"] = served_adapter_mismatch(adapter, data["vlm"])
    elif not options.vllm_python:
        report["vllm"] = {"skipped": "no --vllm-python (vLLM's own environment)"}
    report["templates"] = [template_check(Path(folder)) for folder in options.templates]
    report["seconds"] = round(time.monotonic() - started, 1)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    ran = [e for e in report["train"] if "ok" in e]
    failed = any(not e["ok"] for e in ran) or (report["vllm"] or {}).get("ok") is False or \
        bool((report["vllm"] or {}).get("loupe_adapter_check")) or any(not e["trl_marks"] for e in report["templates"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
