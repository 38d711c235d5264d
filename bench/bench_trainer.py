"""Trainer benchmark: prints one JSON object.

- ``sft_tokens_per_s``: SFT throughput of the tiny model on prompts rendered by agent.prompt;
- ``rl_step``: one GRPO step through TRL (trainer/grpo.py): answers sampled to ``--episodes`` prompts, scored, update;
- ``policy_latency_ms``: agent's LocalPolicy on a tiny checkpoint, per step (median of a few).

Usage: ``.venv/bin/python bench/bench_trainer.py [--episodes 4]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rows(path: Path, n: int) -> None:
    from agent.prompt import render_messages

    with open(path, "w") as fh, open(path.with_name("rl.jsonl"), "w") as rl:
        for i in range(n):
            x, y = 10 + (7 * i) % 140, 55 + (13 * i) % 150
            obs = (f'Instruction: Click on the "b{i}" button.\nURL: /miniwob/click-button.html\n'
                   f'[text] "lorem ipsum dolor" at (40, 58)\n[button] "b{i}" at ({x}, {y})\n[textbox] "" at (60, 130)')
            messages = render_messages(instruction=f'Click on the "b{i}" button.', observation_text=obs, history=[])
            answer = f'Thought: The instruction asks for the "b{i}" button; I click it.\nAction: click(x={x}, y={y})'
            fh.write(json.dumps({"messages": [*messages, {"role": "assistant", "content": answer}]}) + "\n")
            # the same screen as an RL step row: answers scored 1 when they click inside the button
            rl.write(json.dumps({"messages": messages, "format": "loupe", "width": 160, "height": 210, "reward": {
                "kind": "action", "action": f"click(x={x}, y={y})", "box": [x - 10, y - 5, x + 10, y + 5]}}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=4, help="prompts of the GRPO step (2 answers each)")
    parser.add_argument("--sft-steps", type=int, default=10)
    args = parser.parse_args()

    import contextlib
    import io

    from agent.policies.local import LocalPolicy
    from agent.prompt import render_messages
    from trainer.configs import RLConfig, SFTConfig
    from trainer.grpo import train_grpo
    from trainer.sft import train_sft

    work = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    _rows(work / "sft.jsonl", 64)
    quiet = io.StringIO()  # the loops print progress lines; the benchmark prints one object
    with contextlib.redirect_stdout(quiet):
        sft = train_sft(SFTConfig(data=str(work / "sft.jsonl"), init="tiny", out=str(work / "ckpt"),
                                  max_steps=args.sft_steps, log_every=args.sft_steps))
        rl = train_grpo(RLConfig(init=str(work / "ckpt"), out=str(work / "rl"), data=str(work / "rl.jsonl"),
                                 max_steps=1, group_size=2, max_length=512, batch_tokens=512 * args.episodes,
                                 log_every=1))
    policy = LocalPolicy(work / "ckpt", max_new_tokens=96)
    obs = 'Instruction: Focus into the textbox.\nURL: /miniwob/focus-text.html\n[textbox] "" at (81, 70)'
    messages = render_messages(instruction="Focus into the textbox.", observation_text=obs, history=[])
    latencies, tokens = [], []
    for _ in range(5):
        out = policy.act(messages)
        latencies.append(out.latency_ms)
        tokens.append(len(out.token_ids))
    print(json.dumps({
        "sft_tokens_per_s": round(sft["tokens_per_s"], 1),
        "sft_steps": sft["steps"],
        "rl_step": {"prompts": args.episodes, "answers": rl["answers"], "seconds": round(rl["train_seconds"], 3)},
        "policy_latency_ms": round(statistics.median(latencies), 1),
        "policy_tokens_per_step": statistics.median(tokens),
    }))


if __name__ == "__main__":
    main()
