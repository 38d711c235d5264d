"""SFT with held-out rows (``--val-data``): every progress line carries ``val_loss``, the checkpoint keeps the
weights where it was lowest, and ``--patience`` stops a run that only memorises (a flywheel cycle's new rows)."""
import json

import pytest
import torch

from trainer import data as D
from trainer.configs import SFTConfig
from trainer.model import TrainerError, load
from trainer.sft import train_sft


@torch.no_grad()
def mean_answer_loss(model, examples: list[D.Example], pad_token_id: int) -> float:
    """Loss per answer token of ``examples``, as the trainer's validation measures it."""
    batch = D.collate(examples, pad_token_id)
    return float(model.eval()(**batch).loss)


def rows_file(path, n: int, answer=lambda i: f"Thought: button {i}.\nAction: click(x={i}, y=5)"):
    path.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"Click the button {i}."},
        {"role": "assistant", "content": answer(i)}]}) + "\n" for i in range(n)))
    return str(path)


def test_val_loss_on_every_line_early_stop_and_the_best_weights_are_the_ones_saved(tmp_path, capsys):
    data = rows_file(tmp_path / "train.jsonl", 4)
    # held-out answers the training rows contradict: the more it memorises them, the worse these get
    val = rows_file(tmp_path / "val.jsonl", 3, answer=lambda i: "zq zq zq zq")
    metrics = train_sft(SFTConfig(data=data, val_data=val, patience=2, init="tiny", out=str(tmp_path / "ck"),
                                  max_steps=60, lr=0.01, batch_tokens=4096, log_every=2, warmup_steps=0))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"step"')]
    assert all("val_loss" in line for line in lines) and len(lines) >= 3
    losses = [line["val_loss"] for line in lines]
    assert metrics["stopped_by"] == "early_stop" and metrics["steps"] < 60
    assert metrics["val_loss_best"] == pytest.approx(min(losses), abs=1e-5)
    assert metrics["best_step"] == lines[losses.index(min(losses))]["step"]
    assert any("held-out rows had not improved for 2 progress lines" in w for w in metrics["warnings"])
    saved = load(str(tmp_path / "ck"), device=torch.device("cpu"), dtype=torch.float32)
    examples = [D.sft_example(saved.tokenizer, m, 2048) for m in D.read_sft(val)]
    assert mean_answer_loss(saved.model, examples, saved.tokenizer.pad_token_id) == \
        pytest.approx(metrics["val_loss_best"], rel=1e-3)


def test_without_patience_the_run_trains_on_and_still_reports_its_validation(tmp_path):
    data = rows_file(tmp_path / "train.jsonl", 4)
    val = rows_file(tmp_path / "val.jsonl", 2)
    metrics = train_sft(SFTConfig(data=data, val_data=val, init="tiny", out=str(tmp_path / "ck"), max_steps=6,
                                  batch_tokens=4096, log_every=2, warmup_steps=0))
    assert metrics["steps"] == 6 and metrics["stopped_by"] == "max_steps"
    assert metrics["val_loss_first"] is not None and metrics["val_loss_best"] <= metrics["val_loss_first"]


def test_patience_without_val_data_and_an_empty_val_file_are_refused(tmp_path):
    data = rows_file(tmp_path / "train.jsonl", 2)
    with pytest.raises(TrainerError, match="give --val-data"):
        train_sft(SFTConfig(data=data, patience=2, init="tiny", out=str(tmp_path / "ck"), max_steps=2))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(TrainerError, match="no rows"):
        train_sft(SFTConfig(data=data, val_data=str(tmp_path / "empty.jsonl"), init="tiny",
                            out=str(tmp_path / "ck"), max_steps=2))


def test_a_run_reports_nothing_to_the_hugging_face_hub(tmp_path, monkeypatch):
    # TRL pings the Hub from every trainer it builds (outside CI); a Loupe run trains people's data offline
    from huggingface_hub.utils import _telemetry

    queued = []
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(_telemetry, "_start_telemetry_thread", lambda: None)
    monkeypatch.setattr(_telemetry._TELEMETRY_QUEUE, "put", queued.append)
    data = rows_file(tmp_path / "train.jsonl", 4)
    metrics = train_sft(SFTConfig(data=data, init="tiny", out=str(tmp_path / "ck"), max_steps=1, batch_tokens=4096,
                                  warmup_steps=0))
    assert metrics["steps"] == 1 and queued == []
