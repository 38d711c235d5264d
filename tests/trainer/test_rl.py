"""RL of a text model goes through the same GRPO path as a vision-language one (trainer/grpo.py, TRL's GRPOTrainer):
step rows without screenshots, answers sampled from the tiny random HF Llama (warmed by SFT so that it writes
readable clicks), scored by the row's reward, and the trainer's contract (progress lines, metrics.json, loupe.json,
LoRA, exit status 2 on bad input).

The reward rises where it should: the expected reward of the policy over every row's candidate clicks is read off
its own log-probabilities before and after GRPO."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from trainer import cli
from trainer import data as D
from trainer.configs import RLConfig, SFTConfig
from trainer.grpo import train_grpo
from trainer.model import load, read_loupe
from trainer.sft import train_sft

SYSTEM = {"role": "system", "content": "Reply with Thought and Action."}
ROWS = 8


def target(i: int) -> tuple[int, int]:
    return 10 + 7 * i, 60 + 5 * i


def prompt(i: int) -> list[dict]:
    x, y = target(i)
    screen = f'Instruction: Click on the "b{i}" button.\n[button] "b{i}" at ({x}, {y})'
    return [SYSTEM, {"role": "user", "content": screen}]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """Step rows of a text model (no images: the screen in words) and SFT rows with each screen's click. The reward
    accepts a click at the height of the two top buttons (y 58 to 67, the whole width): the warm model clicks at every
    row's height about as often (it learnt where buttons are, not which one is asked for), so GRPO has something to
    move within a few steps."""
    root = tmp_path_factory.mktemp("text-grpo")
    rows = []
    for i in range(ROWS):
        x, y = target(i)
        rows.append({"messages": prompt(i), "format": "loupe", "width": 160, "height": 210,
                     "reward": {"kind": "action", "action": f"click(x={x}, y={y})", "box": [0, 58, 160, 67]}})
    write(root / "rl.jsonl", rows)
    write(root / "sft.jsonl", [{"messages": [*r["messages"], {"role": "assistant", "content": "Action: "
                                                              + r["reward"]["action"]}]} for r in rows])
    return root


@pytest.fixture(scope="module")
def warm(data) -> Path:
    """The tiny random Llama after 60 SFT steps on the clicks: it writes readable clicks at varying heights, so a
    group's answers score 1 and 0 (a real reward signal). At lr 1e-2 (80 steps) the loss spiked and its trajectory
    followed float rounding: a change in the order of the loss's sums (the output layer at answer positions only) gave
    another warm model, half its answers unreadable, and GRPO's gain fell from +0.107 to +0.021 on one machine. At
    3e-3 both orders give the same warm model (expected reward 0.2445 -> 0.3608 after GRPO)."""
    train_sft(SFTConfig(data=str(data / "sft.jsonl"), init="tiny", out=str(data / "warm"), max_steps=60, lr=3e-3,
                        warmup_steps=0, batch_tokens=4096, threads=1, log_every=80))
    return data / "warm"


def rl_config(data: Path, init: Path, out: Path, **kw) -> RLConfig:
    kw = {"max_steps": 4, "log_every": 1, "lr": 1e-3, "warmup_steps": 0, "group_size": 4, "batch_tokens": 2048,
          "max_length": 512, "max_new_tokens": 16, "threads": 1, "ppo_epochs": 1, **kw}
    return RLConfig(data=str(data), init=str(init), out=str(out), **kw)


@torch.no_grad()
def expected_reward(checkpoint: Path) -> float:
    """Over the rows, the policy's probability of a rewarded click among the clicks at every row's height (the row's
    own x), each answer's probability its summed token log-probability."""
    loaded = load(str(checkpoint))
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    total = 0.0
    for i in range(ROWS):
        x, _ = target(i)
        answers = [[{"role": "assistant", "content": f"Action: click(x={x}, y={target(j)[1]})"}] for j in range(ROWS)]
        batch = D.collate([D.completion_example(tokenizer, prompt(i), a, 4096) for a in answers],
                          tokenizer.pad_token_id)
        logp, mask = D.token_logprobs(model, batch)
        total += float(torch.softmax((logp * mask).sum(-1), 0)[:2].sum())  # rows 0 and 1: y 60 and 65
    return total / ROWS


def test_text_grpo_through_the_cli_raises_the_expected_reward(tmp_path, data, warm, capsys):
    out = tmp_path / "out"
    code = cli.main(["rl", "--init", str(warm), "--data", str(data / "rl.jsonl"), "--out", str(out),
                     "--max-steps", "4", "--log-every", "1", "--lr", "1e-3", "--warmup-steps", "0", "--group-size",
                     "4", "--batch-tokens", "2048", "--max-length", "512", "--max-new-tokens", "16", "--threads", "1",
                     "--ppo-epochs", "1"])
    assert code == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # stdout: JSON lines only
    progress, done = lines[:-1], lines[-1]
    assert [p["step"] for p in progress] == [1, 2, 3, 4] and all(p["total"] == 4 for p in progress)
    assert all({"loss", "reward", "reward_std", "void", "lr"} <= set(p) for p in progress)
    metrics = done["metrics"]
    assert done["done"] is True and metrics == json.loads((out / "metrics.json").read_text())
    assert (metrics["algorithm"], metrics["advantage"], metrics["model"]) == ("rl", "grpo", "text")
    assert metrics["answers"] == 4 * 4 * 4  # 4 steps of 4 prompts (2048 / 512) x 4 answers
    assert 0 < metrics["answers_rewarded"] < metrics["answers"] and any(p["reward_std"] > 0 for p in progress)
    loupe = read_loupe(out)
    assert (loupe["algorithm"], loupe["adapter"], loupe["prompt_style"]) == ("rl", None, "named")
    before, after = expected_reward(warm), expected_reward(out)
    assert after > before + 0.04, (before, after)


def test_text_grpo_with_lora_trains_and_saves_the_adapter(tmp_path, data, warm):
    out = tmp_path / "out"
    metrics = train_grpo(rl_config(data / "rl.jsonl", warm, out, max_steps=1, lora="r=8", lr=1e-2, kl_coef=0.05))
    assert metrics["steps"] == 1 and "final_kl" in metrics and (out / "metrics.json").is_file()
    adapter = load_file(out / "adapter" / "adapter_model.safetensors")
    assert any(k.endswith("lora_B.weight") and v.abs().sum() > 0 for k, v in adapter.items())  # B starts at zero
    assert not any(".ref." in k for k in adapter)  # the KL reference copy is not saved
    assert read_loupe(out)["adapter"] == "adapter"


@pytest.mark.parametrize("change, message", [
    ({"images": ["s.png"]}, "rl.jsonl:1: the row has screenshots (rendered for a checkpoint that reads them), and "
                            "--init is a text model"),
    ({"format": "uitars", "width": None, "height": None}, "rl.jsonl:1: a uitars answer's coordinates are read on the "
                                                          "screen's size: give the row its width and height"),
    ({"messages": [SYSTEM]}, "rl.jsonl:1: messages must end with the user turn the answer replies to"),
    ({"reward": {"kind": "action", "action": "click(x=1, y=2)"}}, "rl.jsonl:1: reward: a click is judged by where"),
])
def test_bad_text_rows_exit_2_with_one_plain_line(tmp_path, data, change, message, capsys):
    row = {**json.loads((data / "rl.jsonl").read_text().splitlines()[0]), **change}
    row = {k: v for k, v in row.items() if v is not None}
    code = cli.main(["rl", "--init", "tiny", "--data", str(write(tmp_path / "rl.jsonl", [row])),
                     "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and not (tmp_path / "out").exists()
    assert captured.err.startswith("error: ") and message in captured.err and captured.err.count("\n") == 1


def test_whole_episode_rows_and_ppo_are_refused_saying_what_to_do(tmp_path, data, capsys):
    episode = {"episode_id": 1, "task": "click-button", "seed": 0, "reward": 1.0,
               "steps": [{"prompt": prompt(0), "output": "Action: click(x=10, y=60)", "reward": 1.0}]}
    base = ["rl", "--init", "tiny", "--out", str(tmp_path / "out")]
    assert cli.main([*base, "--data", str(write(tmp_path / "old.jsonl", [episode]))]) == 2
    assert "old.jsonl:1: a whole-episode RL row" in capsys.readouterr().err
    assert cli.main([*base, "--data", str(data / "rl.jsonl"), "--advantage", "gae"]) == 2
    assert "--advantage gae: PPO with a critic has no trainer here" in capsys.readouterr().err
