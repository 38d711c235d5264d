"""Several training processes: SFT of the tiny VLM under torchrun (gloo on the CPU) against one process with the
same rows, and the launches the trainer refuses (trainer/distributed.py)."""

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

from trainer import cli
from trainer.configs import SFTConfig
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


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def test_launches_that_would_not_train_as_asked_exit_2_saying_why(tmp_path, vlm_dir, rows, monkeypatch, capsys):
    data, out = ["--data", str(rows)], ["--out", str(tmp_path / "out")]
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")  # rank 0: this test's own stdout stays where it is
    code, err = run_cli(["rl", "--init", "tiny", *data, *out], capsys)  # a text model's RL: rl.py's own loop
    assert code == 2 and "2 processes were launched, but rl of this checkpoint trains in one process" in err
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
