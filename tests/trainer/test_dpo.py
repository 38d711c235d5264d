"""DPO raises the margin of the chosen (corrected) turn over the rejected (proposed) one."""

import json

from trainer.configs import DPOConfig
from trainer.dpo import train_dpo
from trainer.model import read_loupe


def test_dpo_raises_chosen_over_rejected_margin(tmp_path):
    rows = []
    for i in range(8):
        x, y = 10 + 7 * i, 60 + 5 * i
        prompt = [{"role": "system", "content": "Reply with Thought and Action."},
                  {"role": "user", "content": f'Instruction: Click on the "b{i}" button.\n[button] "b{i}" at ({x}, {y})'}]
        rows.append({"prompt": prompt,
                     "chosen": [{"role": "assistant", "content": f"Thought: b{i}.\nAction: click(x={x}, y={y})"}],
                     "rejected": [{"role": "assistant", "content": f"Thought: b{i}.\nAction: click(x={y}, y={x})"}]})
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics = train_dpo(DPOConfig(data=str(data), init="tiny", out=str(tmp_path / "ck"), max_steps=12,
                                  lr=2e-3, beta=0.1, warmup_steps=0, log_every=4, batch_tokens=4096))
    assert metrics["logp_margin_after"] > metrics["logp_margin_before"] + 1.0
    assert metrics["reward_margin"] > 0.1
    assert metrics["final_loss"] < metrics["first_loss"]
    assert read_loupe(tmp_path / "ck")["algorithm"] == "dpo"


def test_pairs_whose_chosen_equals_rejected_are_left_out_and_a_file_of_only_those_is_refused(tmp_path):
    import pytest

    from trainer.data import read_dpo
    from trainer.model import TrainerError

    prompt = [{"role": "user", "content": "Click it."}]
    same = {"prompt": prompt, "chosen": [{"role": "assistant", "content": "Action: click(x=1, y=2)"}],
            "rejected": [{"role": "assistant", "content": "Action:  click(x=1, y=2) "}]}
    differs = {"prompt": prompt, "chosen": [{"role": "assistant", "content": "Action: click(x=1, y=2)"}],
               "rejected": [{"role": "assistant", "content": "Action: click(x=9, y=9)"}]}
    data = tmp_path / "pairs.jsonl"
    data.write_text(json.dumps(same) + "\n" + json.dumps(differs) + "\n")
    assert [row.rejected[0]["content"] for row in read_dpo(data)] == ["Action: click(x=9, y=9)"]
    data.write_text(json.dumps(same) + "\n")
    with pytest.raises(TrainerError, match="no preference to learn"):
        read_dpo(data)
