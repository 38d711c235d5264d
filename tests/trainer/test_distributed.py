"""Several training processes: SFT, DPO and GRPO of the tiny VLM under torchrun (gloo on the CPU) against one process
with the same rows, the ranks' weights compared tensor by tensor, a sharded run's save, and the launches the trainer
refuses (trainer/distributed.py)."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw
from safetensors.torch import load_file

from trainer import cli, distributed
from trainer.configs import DPOConfig, RLConfig, SFTConfig
from trainer.dpo import train_dpo
from trainer.distributed import TRACE_ENV
from trainer.model import read_loupe
from trainer.sft import train_sft
from trainer.tiny_vlm import save_tiny_vlm

ROOT = Path(__file__).resolve().parents[2]
ROWS = 8
# One row a process a step (batch_tokens / max_length = 1): 8 rows are 4 steps of 2 processes, one pass
OPTIONS = {"max_steps": 4, "log_every": 1, "lr": 1e-3, "warmup_steps": 0, "max_length": 2048, "seed": 3}


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory) -> Path:
    return save_tiny_vlm(tmp_path_factory.mktemp("vlm") / "init")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    """8 SFT rows, one 160x210 screen each, answers of different lengths (the loss is averaged over tokens)."""
    folder = tmp_path_factory.mktemp("rows")
    (folder / "images").mkdir()
    lines = []
    for i in range(ROWS):
        image = Image.new("RGB", (160, 210), "white")
        ImageDraw.Draw(image).rectangle([10 + 12 * i, 40, 50 + 12 * i, 60], fill=(0, 0, 200))
        image.save(folder / "images" / f"s{i}.png")
        lines.append({"messages": [{"role": "system", "content": "You operate a web page."},
                                   {"role": "user", "content": f"Click button {i}."},
                                   {"role": "assistant", "content": f"Action: click(x={30 + 12 * i}, y=50)" + "!" * i}],
                      "images": [f"images/s{i}.png"]})
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def traces(folder: Path) -> dict[int, list[dict]]:
    """Each rank's trace records, by rank."""
    return {int(f.stem.removeprefix("trace-rank")): [json.loads(line) for line in f.read_text().splitlines()]
            for f in folder.glob("trace-rank*.jsonl")}


def test_two_processes_train_disjoint_rows_to_equal_weights_and_the_loss_of_one_process_with_twice_the_batch(
        tmp_path, vlm_dir, rows, monkeypatch, capsys):
    out, trace = tmp_path / "two", tmp_path / "trace-two"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "trainer",
            "sft", "--init", str(vlm_dir), "--data", str(rows), "--out", str(out), "--threads", "1",
            "--batch-tokens", "2048", *[f"--{k.replace('_', '-')}={v}" for k, v in OPTIONS.items()]]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, TRACE_ENV: str(trace), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]  # rank 0 alone: each line once
    assert [line["step"] for line in lines[:-1]] == [1, 2, 3, 4] and lines[-1]["done"] is True
    assert "rank 1 of 2 done" in proc.stderr
    assert read_loupe(out)["algorithm"] == "sft" and json.loads((out / "metrics.json").read_text())["steps"] == 4
    ranks = traces(trace)
    steps = {rank: [r["rows"] for r in records if "rows" in r] for rank, records in ranks.items()}
    assert sorted(steps) == [0, 1] and all(len(s) == 4 and all(len(b) == 1 for b in s) for s in steps.values())
    seen = {rank: {row for batch in s for row in batch} for rank, s in steps.items()}
    assert not seen[0] & seen[1] and seen[0] | seen[1] == set(range(1, ROWS + 1))  # snapshot line numbers
    digests = {records[-1]["weights_sha256"] for records in ranks.values()}
    assert len(digests) == 1

    # one process, two rows a step: the same rows in the same steps, the same losses and weights
    monkeypatch.setenv(TRACE_ENV, str(tmp_path / "trace-one"))
    capsys.readouterr()
    metrics = train_sft(SFTConfig(data=str(rows), init=str(vlm_dir), out=str(tmp_path / "one"), threads=1,
                                  batch_tokens=4096, **OPTIONS))
    one = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (single,) = traces(tmp_path / "trace-one").values()
    assert [sorted(r["rows"]) for r in single if "rows" in r] == [sorted(a + b) for a, b in zip(steps[0], steps[1])]
    assert metrics["steps"] == 4
    for a, b in zip(one, lines[:-1], strict=True):  # 1e-6 apart here; each rank's own token mean was 1.2e-3 off
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-4)
    assert lines[-1]["metrics"]["final_loss"] == pytest.approx(metrics["final_loss"], abs=1e-4)
    two, single_weights = load_file(out / "model.safetensors"), load_file(tmp_path / "one" / "model.safetensors")
    assert all(torch.allclose(two[k], single_weights[k], atol=1e-5) for k in single_weights)


def torchrun(command: str, *args: str, trace: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m trainer <command> ...`` under torchrun with two gloo processes."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "trainer",
            command, *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", **({TRACE_ENV: str(trace)} if trace else {})}
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def assert_same_checkpoint(a: Path, b: Path, init: Path, atol: float) -> None:
    """Two checkpoint dirs hold the same tensors, name by name, within ``atol``, while training moved the weights
    from ``init`` at least ten times as far (float sums in another order differ in the last bits; on a CPU, gloo's
    all-reduce of two halves against one process's sum of the whole batch)."""
    first, second, start = (load_file(d / "model.safetensors") for d in (a, b, init))
    assert first.keys() == second.keys()
    far = {k: float((first[k].float() - second[k].float()).abs().max()) for k in first}
    assert max(far.values()) <= atol, sorted(far.items(), key=lambda kv: -kv[1])[:3]
    moved = max(float((first[k].float() - start[k].float()).abs().max()) for k in first if k in start)
    assert moved >= 10 * atol


@pytest.fixture(scope="module")
def pairs(rows) -> Path:
    """The 8 screens as DPO pairs: the click on the button chosen, a click beside it rejected."""
    path = rows.parent / "pairs.jsonl"
    lines = []
    for i, line in enumerate(map(json.loads, rows.read_text().splitlines())):
        *prompt, answer = line["messages"]
        lines.append({"prompt": prompt, "chosen": [answer], "images": line["images"],
                      "rejected": [{"role": "assistant", "content": f"Action: click(x={150 - 12 * i}, y=190)"}]})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_two_processes_of_dpo_give_the_losses_and_weights_of_one_process_with_twice_the_batch(
        tmp_path, vlm_dir, pairs, monkeypatch, capsys):
    options = {**OPTIONS, "beta": 0.5}
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    proc = torchrun("dpo", "--init", str(vlm_dir), "--data", str(pairs), "--out", str(tmp_path / "two"),
                    "--threads", "1", "--batch-tokens", "2048", *flags, trace=tmp_path / "trace-two")
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [line["step"] for line in lines[:-1]] == [1, 2, 3, 4] and lines[-1]["done"] is True
    ranks = traces(tmp_path / "trace-two")
    seen = {rank: [row for r in records if "rows" in r for row in r["rows"]] for rank, records in ranks.items()}
    assert sorted(seen) == [0, 1] and not set(seen[0]) & set(seen[1]) and len(seen[0]) == len(seen[1]) == 4
    assert len({records[-1]["weights_sha256"] for records in ranks.values()}) == 1

    capsys.readouterr()
    metrics = train_dpo(DPOConfig(data=str(pairs), init=str(vlm_dir), out=str(tmp_path / "one"), threads=1,
                                  batch_tokens=4096, **options))
    one = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert metrics["steps"] == 4 and len(one) == 4
    for a, b in zip(one, lines[:-1], strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-4)
        assert a["margin"] == pytest.approx(b["margin"], abs=1e-3)
    assert lines[-1]["metrics"]["logp_margin_after"] == pytest.approx(metrics["logp_margin_after"], abs=1e-3)
    assert_same_checkpoint(tmp_path / "two", tmp_path / "one", vlm_dir, atol=1e-4)


def test_two_processes_of_grpo_score_disjoint_rows_count_every_answer_and_end_with_equal_weights(
        tmp_path, vlm_dir, rows):
    """GRPO of the tiny VLM (warmed by SFT on the right clicks, so a group's answers score 1 and 0) in two gloo
    processes: each rank samples answers to its own rows, the metrics count the answers of both ranks, and the
    ranks end with equal weights (save_run compares them tensor by tensor before rank 0 writes). Unlike SFT and DPO,
    the losses are not compared with one process's: answers are sampled, and one process drawing for twice the rows
    from the same seeded generator draws other answers than two processes drawing for half each."""
    rl, sft, warm = tmp_path / "rl.jsonl", tmp_path / "sft.jsonl", tmp_path / "warm"
    lines = []
    for i, line in enumerate(map(json.loads, rows.read_text().splitlines())):
        click = f"click(x={30 + 12 * i}, y=50)"
        lines.append({"messages": line["messages"][:-1], "images": [str(rows.parent / line["images"][0])],
                      "format": "loupe", "width": 160, "height": 210,
                      "reward": {"kind": "action", "action": click, "box": [10 + 12 * i, 40, 50 + 12 * i, 60]}})
    rl.write_text("".join(json.dumps(line) + "\n" for line in lines))
    sft.write_text("".join(json.dumps({"messages": [*line["messages"], {
        "role": "assistant", "content": "Action: " + line["reward"]["action"]}], "images": line["images"]}) + "\n"
        for line in lines))
    train_sft(SFTConfig(data=str(sft), init=str(vlm_dir), out=str(warm), max_steps=40, lr=1e-2, warmup_steps=0,
                        batch_tokens=8192, max_length=2048, threads=1, log_every=40))
    proc = torchrun("rl", "--init", str(warm), "--data", str(rl), "--out", str(tmp_path / "two"), "--advantage",
                    "grpo", "--max-steps", "2", "--log-every", "1", "--lr", "1e-3", "--warmup-steps", "0",
                    "--group-size", "4", "--batch-tokens", "2048", "--max-length", "2048", "--max-new-tokens", "20",
                    "--threads", "1", "--ppo-epochs", "1", "--seed", "3", trace=tmp_path / "trace")
    out = [json.loads(line) for line in proc.stdout.splitlines()]  # rank 0 alone: each line once
    assert [line["step"] for line in out[:-1]] == [1, 2] and out[-1]["done"] is True
    metrics = out[-1]["metrics"]
    assert metrics["answers"] == 2 * 2 * 4  # 2 steps x 2 ranks x a prompt's 4 answers: both ranks counted
    ranks = traces(tmp_path / "trace")
    seen = {rank: [row for r in records if "rows" in r for row in r["rows"]] for rank, records in ranks.items()}
    assert sorted(seen) == [0, 1] and all(len(s) == 2 * 4 for s in seen.values())  # its answers' rows, 4 a prompt
    assert not set(seen[0]) & set(seen[1])
    assert len({records[-1]["weights_sha256"] for records in ranks.values()}) == 1
    assert read_loupe(tmp_path / "two")["algorithm"] == "rl"
    assert 0 < metrics["answers_rewarded"] < metrics["answers"]  # a real signal: the equal weights moved
    before, after = load_file(warm / "model.safetensors"), load_file(tmp_path / "two" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def test_launches_that_would_not_train_as_asked_exit_2_saying_why(tmp_path, vlm_dir, rows, monkeypatch, capsys):
    data, out = ["--data", str(rows)], ["--out", str(tmp_path / "out")]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")  # rank 0: this test's own stdout stays where it is
    code, err = run_cli(["demos", *out], capsys)  # scripted solvers: each process would play every episode
    assert code == 2 and "2 processes were launched, but demos trains in one process" in err
    code, err = run_cli(["eval", "--init", str(vlm_dir), *out], capsys)
    assert code == 2 and "but eval trains in one process" in err
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    if not importlib.util.find_spec("deepspeed"):
        code, err = run_cli(["sft", "--init", str(vlm_dir), *data, *out], capsys)
        assert code == 2 and "DeepSpeed, which is not installed here: pip install deepspeed" in err
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED")
    assert not (tmp_path / "out").exists()

    # measured: accelerate launch --cpu --num_processes 2 starts ONE process, which refuses to train alone
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2", "-m",
                           "trainer", "sft", "--init", str(vlm_dir), *data, *out], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k not in ("RANK",)})
    assert proc.returncode != 0 and proc.stdout == ""
    assert re.search(r"^error: accelerate launch started ONE process where several were asked for", proc.stderr, re.M)
    assert not (tmp_path / "out").exists()


def test_two_processes_train_a_text_model_on_disjoint_rows_to_equal_weights(tmp_path):
    """Text SFT goes through TRL too: the same launch, rows dealt to the ranks, one checkpoint."""
    rows = tmp_path / "text.jsonl"
    rows.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"Click button {i}."},
        {"role": "assistant", "content": f"Action: click(x={30 + 12 * i}, y=50)"}]}) + "\n" for i in range(ROWS)))
    out, trace = tmp_path / "two", tmp_path / "trace"
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "trainer",
            "sft", "--init", "tiny", "--data", str(rows), "--out", str(out), "--threads", "1", "--max-steps", "2",
            "--batch-tokens", "8", "--log-every", "1"]  # a row a step in each process (rows of about 20 tokens)
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, TRACE_ENV: str(trace), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads(line).get("step") for line in proc.stdout.splitlines()] == [1, 2, None]
    ranks = traces(trace)
    seen = {rank: [row for r in records if "rows" in r for row in r["rows"]] for rank, records in ranks.items()}
    assert sorted(seen) == [0, 1] and all(len(rows) == 2 for rows in seen.values()) and not set(seen[0]) & set(seen[1])
    assert len({records[-1]["weights_sha256"] for records in ranks.values()}) == 1
    assert read_loupe(out)["base_model"] == "tiny"


def test_ranks_weights_are_compared_tensor_by_tensor(tmp_path):
    """Two ranks whose weights differ only by two entries swapped have the same float64 sum (what the check compared
    before issue 36): both must refuse to save, naming the tensor; equal weights pass. Two gloo processes
    (tests/trainer/_ranks.py)."""
    import socket

    import torch.multiprocessing as mp

    from tests.trainer._ranks import compare_weights

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(compare_weights, args=(port, str(tmp_path)), nprocs=2, join=True)
    said = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["equal"] for s in said] == ["same", "same"]
    assert all(s["swapped"].startswith("the 2 processes ended with different weights in 1 of 1 tensors (e.g. weight)")
               for s in said), said


class _Zero3Config:
    """transformers' global DeepSpeed config as accelerate leaves it for a ZeRO-3 run (HfDeepSpeedConfig needs
    deepspeed installed, which this machine has not: stood in by what from_pretrained reads of it)."""

    config = {"zero_optimization": {"stage": 3}}

    def is_zero3(self) -> bool:
        return True


def test_a_sharded_save_rebuilds_the_whole_model_on_rank_0_outside_zero3_init(tmp_path, vlm_dir, rows):
    """Issue 36: under ZeRO-3 rank 0 rebuilt the model to save the gathered weights while accelerate kept the
    DeepSpeed config alive, so from_pretrained entered deepspeed.zero.Init on one rank (a hang on a GPU node; here,
    without deepspeed, its import fails). The save now loads the whole model there and writes the gathered weights."""
    from types import SimpleNamespace

    from transformers.integrations import deepspeed as hf_deepspeed

    from trainer.trl_trainers import save_run
    from trainer.vlm import prompt_style

    config = SFTConfig(data=str(rows), init=str(vlm_dir), out=str(tmp_path / "out"), threads=1)
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(vlm_dir, local_files_only=True)
    gathered = {k: v + 1.0 for k, v in model.state_dict().items()}  # what get_state_dict gives rank 0: other weights
    plugin = SimpleNamespace(zero_stage=3)
    trainer = SimpleNamespace(is_fsdp_enabled=False, model_wrapped=None, args=SimpleNamespace(device=torch.device("cpu")),
                              accelerator=SimpleNamespace(state=SimpleNamespace(deepspeed_plugin=plugin),
                                                          get_state_dict=lambda model: gathered,
                                                          wait_for_everyone=lambda: None))
    loaded = SimpleNamespace(model=model, prompt_style=prompt_style(config), is_lora=False)
    zero3 = _Zero3Config()
    hf_deepspeed.set_hf_deepspeed_config(zero3)
    try:
        save_run(trainer, loaded, config, "sft", {"steps": 1})
        assert hf_deepspeed.is_deepspeed_zero3_enabled()  # the run's config is put back
    finally:
        hf_deepspeed.unset_hf_deepspeed_config()
    saved = AutoModelForImageTextToText.from_pretrained(tmp_path / "out", local_files_only=True).state_dict()
    assert saved.keys() == gathered.keys()
    assert all(torch.equal(saved[k], gathered[k]) for k in gathered)


@pytest.mark.parametrize("lora, weights", [("", torch.float32), ("r=4", torch.bfloat16)])
def test_on_a_gpu_a_full_fine_tune_keeps_float32_weights_under_bf16_compute(monkeypatch, lora, weights):
    """Issue 36: full fine-tunes on GPUs updated bfloat16 weights with no float32 master copy. --dtype auto on CUDA
    now loads a full fine-tune's weights in float32 and computes in bf16 autocast; a LoRA's frozen base stays
    bfloat16; --dtype bf16 is taken as asked. No GPU is touched: the device is only named."""
    from trainer import model as M
    from trainer.trl_trainers import trainer_args

    monkeypatch.setattr(M.torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    cuda = torch.device("cuda", 0)
    config = SFTConfig(data="rows.jsonl", init="tiny", out="out", lora=lora)
    assert distributed.weights_dtype(config, cuda) == weights
    assert distributed.weights_dtype(SFTConfig(data="r", init="tiny", out="o", lora=lora, dtype="bf16"), cuda) == \
        torch.bfloat16
    assert distributed.weights_dtype(config, torch.device("cpu")) == torch.float32
    args = trainer_args(config, cuda, weights, 4, 1, "/tmp/unused")
    assert args["bf16"] is True and args["activation_checkpointing"] is True
    assert trainer_args(SFTConfig(data="r", init="tiny", out="o", dtype="fp32"), cuda, torch.float32, 4, 1,
                        "/tmp/unused")["bf16"] is False


def test_under_fsdp_activations_are_checkpointed_by_fsdp_alone(monkeypatch):
    """Issue 36: the Trainer checkpointed activations while fsdp.yaml's fsdp_activation_checkpointing was false (a
    redundant all-gather in the backward pass); transformers refuses the two at once."""
    import yaml

    from trainer.trl_trainers import trainer_args

    launch = yaml.safe_load((ROOT / "trainer" / "launch" / "fsdp.yaml").read_text())
    assert launch["fsdp_config"]["fsdp_activation_checkpointing"] is True
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    config = SFTConfig(data="rows.jsonl", init="tiny", out="out")
    assert trainer_args(config, torch.device("cuda", 0), torch.float32, 4, 1, "/tmp/unused")[
        "activation_checkpointing"] is False
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    assert trainer_args(config, torch.device("cuda", 0), torch.float32, 4, 1, "/tmp/unused")[
        "activation_checkpointing"] is True
