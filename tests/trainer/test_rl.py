"""RL raises the reward of what the policy does, and keeps void trajectories out of the loss.

Offline, on an RL snapshot of the shape agent/rows.py records: for each prompt a group of attempts, the
correct click rewarded 1, a wrong one 0, plus a void attempt (rewarded, to prove it is masked).
The expected reward of the policy over its attempts is read off its own log-probabilities.
"""

import json

import pytest
import torch

from trainer import data as D
from trainer.configs import RLConfig
from trainer.model import load
from trainer.rl import train_rl

N_PROMPTS = 6


def _snapshot(path):
    rows = []
    for i in range(N_PROMPTS):
        x, y = 20 + 11 * i, 70 + 9 * i
        prompt = [{"role": "user", "content": f'Instruction: Focus into the textbox.\n[textbox] "" at ({x}, {y})'}]
        wrong = f'Action: scroll(x={x}, y={y}, direction="down")'
        attempts = [(f"Action: click(x={x}, y={y})", 1.0, False), (wrong, 0.0, False),
                    (f"Action: click(x={x}, y={y})", 1.0, False), (wrong, 0.0, False),
                    ("zz(((", 1.0, True)]
        for k, (output, reward, void) in enumerate(attempts):
            rows.append({"episode_id": f"{i}-{k}", "task": "focus-text", "seed": i, "reward": reward,
                         "group": f"focus-text:{i}",
                         "steps": [{"prompt": prompt, "output": output, "reward": reward, "void": void}]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return D.read_rl(path)


@torch.no_grad()
def _expected_reward_and_void_logp(checkpoint, episodes):
    loaded = load(checkpoint)
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    rewards, void_logps = [], []
    for i in range(N_PROMPTS):
        group = episodes[5 * i: 5 * i + 5]
        logps = []
        for episode in group:
            step = episode.steps[0]
            example = D.completion_example(tokenizer, step.prompt, [{"role": "assistant", "content": step.output}], 4096)
            logp, mask = D.token_logprobs(model, D.collate([example], tokenizer.pad_token_id))
            logps.append(float(logp.sum()) / int(mask.sum()))  # per token: the attempts differ in length
        good, bad = logps[0], logps[1]
        rewards.append(1.0 / (1.0 + torch.exp(torch.tensor(bad - good)).item()))
        void_logps.append(logps[4])
    return sum(rewards) / len(rewards), sum(void_logps) / len(void_logps)


@pytest.mark.parametrize("advantage", ["grpo", "gae"])
def test_offline_rl_raises_expected_reward_and_masks_void(tmp_path, advantage):
    episodes = _snapshot(tmp_path / "rl.jsonl")
    init = tmp_path / "init"
    from trainer.model import save_tiny_untrained

    save_tiny_untrained(init, seed=0)
    before, void_before = _expected_reward_and_void_logp(str(init), episodes)
    metrics = train_rl(RLConfig(data=str(tmp_path / "rl.jsonl"), init=str(init), out=str(tmp_path / "out"),
                                advantage=advantage, max_steps=8, episodes_per_step=30, lr=3e-3, critic_lr=3e-3,
                                value_pretrain_steps=2, ppo_epochs=2, batch_tokens=4096, log_every=1))
    after, void_after = _expected_reward_and_void_logp(str(tmp_path / "out"), episodes)
    assert after > before + (0.1 if advantage == "grpo" else 0.05), (before, after)
    assert metrics["void_rate"] == pytest.approx(0.2)
    # the void attempt was rewarded but masked: the policy did not learn to write it
    assert void_after < void_before + 1.0, (void_before, void_after)
