"""A text run on the CPU whose widest batch would keep more activations than LOUPE_TRAINER_CHECKPOINT_ABOVE_GB
checkpoints them (trainer/trl_trainers.py checkpoints_activations): the same training, in less memory. A cycle's SFT
of SmolLM2 with the shop's 2,048-token rows in one batch had held 15-17 GB and was killed by the kernel."""
import json

import torch
from safetensors.torch import load_file

from trainer.configs import SFTConfig
from trainer.model import save_tiny_untrained
from trainer.trl_trainers import activation_gb, checkpoints_activations
from tests.stack import trainer_run

SMOLLM2 = {"num_hidden_layers": 30, "hidden_size": 576, "intermediate_size": 1536}


def test_the_estimate_of_a_smollm2_row_is_what_one_took_and_a_model_without_a_config_has_none(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    # one 2,048-token row of SmolLM2-135M peaked at 5.5 GB in a LoRA step on the CPU
    assert 4.5 < activation_gb(str(tmp_path), 2048) < 6.0
    assert activation_gb(str(tmp_path / "missing"), 2048) is None
    config = SFTConfig(init=str(tmp_path))
    cpu = torch.device("cpu")
    assert checkpoints_activations(config, cpu, 3, [300, 2048, 700])  # three rows of the shop's length: ~15 GB
    assert not checkpoints_activations(config, cpu, 3, [300, 350, 400])  # a batch of MiniWoB rows: ~1 GB
    assert not checkpoints_activations(config, torch.device("meta"), 3, [2048])  # a GPU run decides on its own
    assert not checkpoints_activations(SFTConfig(init="tiny"), cpu, 3, [2048])


def _rows(n: int) -> list[dict]:
    return [{"messages": [{"role": "system", "content": "Act on the screen."},
                          {"role": "user", "content": f"Task: click the button {i}.\n" + "[text] filler words " * (3 + i % 5)},
                          {"role": "assistant", "content": f"Thought: the button {i}.\nAction: click(x={i}, y={2 * i})"}]}
            for i in range(n)]


def test_a_run_over_the_limit_checkpoints_activations_and_trains_the_same_weights(tmp_path, monkeypatch):
    init = save_tiny_untrained(tmp_path / "init")
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in _rows(12)))
    runs = {}
    for name, limit in (("plain", None), ("checkpointed", "0")):
        if limit is None:
            monkeypatch.delenv("LOUPE_TRAINER_CHECKPOINT_ABOVE_GB", raising=False)
        else:
            monkeypatch.setenv("LOUPE_TRAINER_CHECKPOINT_ABOVE_GB", limit)
        _, out, err = trainer_run("sft", "--data", str(data), "--init", str(init), "--out", str(tmp_path / name),
                                  "--max-steps", "4", "--lora", "r=4", "--batch-tokens", "256", "--lr", "0.003")
        runs[name] = (json.loads(out.strip().splitlines()[-1])["metrics"], err)
    assert "activations checkpointed" in runs["checkpointed"][1] and "activations checkpointed" not in runs["plain"][1]
    plain, checkpointed = runs["plain"][0], runs["checkpointed"][0]
    assert checkpointed["steps"] == plain["steps"] == 4
    assert abs(checkpointed["final_loss"] - plain["final_loss"]) < 1e-5, (plain, checkpointed)
    assert checkpointed["final_loss"] < checkpointed["first_loss"]  # the LoRA learnt through the recomputed layers
    a = load_file(str(tmp_path / "plain" / "model.safetensors"))
    b = load_file(str(tmp_path / "checkpointed" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
