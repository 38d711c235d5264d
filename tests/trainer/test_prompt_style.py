"""The prompt style a checkpoint reads: recorded by training, served by the policy and the rollout loop."""

import json

from agent.actions import Action, format_turn
from agent.envs.base import Element, Env, Observation, StepResult
from agent.policies.local import LocalPolicy
from agent.prompt import render_messages, render_observation, system_prompt
from agent.rollout import run_episode
from trainer.configs import SFTConfig
from trainer.model import read_loupe, save_tiny_untrained
from trainer.serve import ModelRegistry, chat_completion
from trainer.sft import train_sft


def _observation(x: int) -> Observation:
    return Observation('Click on the "ok" button.', "http://127.0.0.1:9/miniwob/click-button.html", b"", 160, 210,
                       [Element("text", "lorem", 40, 58, 50, 10), Element("button", "ok", x, 100, 20, 12)])


def _rows(path, style: str, n: int = 8):
    with open(path, "w") as fh:
        for i in range(n):
            obs = _observation(20 + 10 * i)
            messages = render_messages(instruction=obs.instruction, observation_text=render_observation(obs, style),
                                       history=[], style=style)
            turn = format_turn('I click "ok".', Action("click", {"x": 20 + 10 * i, "y": 100}))
            fh.write(json.dumps({"messages": [*messages, {"role": "assistant", "content": turn}]}) + "\n")
    return path


def _sft(tmp_path, data, init="tiny", **kw):
    out = tmp_path / f"ckpt-{len(list(tmp_path.iterdir()))}"
    metrics = train_sft(SFTConfig(data=str(data), init=str(init), out=str(out), max_steps=2, warmup_steps=0,
                                  log_every=1, threads=1, **kw))
    return out, metrics


def test_sft_from_tiny_re_renders_full_rows_named_and_records_the_style(tmp_path, caplog):
    caplog.set_level("INFO", logger="trainer")
    ckpt, metrics = _sft(tmp_path, _rows(tmp_path / "full.jsonl", "full"))
    assert read_loupe(ckpt)["prompt_style"] == metrics["prompt_style"] == "named"
    assert "8 of 8 rows re-rendered in the named prompt style" in caplog.text
    assert LocalPolicy(ckpt).prompt_style == "named"
    # a checkpoint passes its style on, an old compact one too; an explicit style overrides it
    child, _ = _sft(tmp_path, _rows(tmp_path / "compact.jsonl", "compact"), init=ckpt)
    assert read_loupe(child)["prompt_style"] == "named"
    old, _ = _sft(tmp_path, tmp_path / "compact.jsonl", prompt_style="compact")
    old_child, _ = _sft(tmp_path, tmp_path / "full.jsonl", init=old)
    assert read_loupe(old_child)["prompt_style"] == "compact" and LocalPolicy(old_child).prompt_style == "compact"
    full, _ = _sft(tmp_path, tmp_path / "full.jsonl", prompt_style="full")
    assert read_loupe(full)["prompt_style"] == "full" and LocalPolicy(full).prompt_style == "full"


def test_plain_hf_dirs_and_old_checkpoints_read_the_full_prompt(tmp_path):
    ckpt = save_tiny_untrained(tmp_path / "old")
    assert LocalPolicy(ckpt).prompt_style == "named"
    loupe = json.loads((ckpt / "loupe.json").read_text())
    del loupe["prompt_style"]
    (ckpt / "loupe.json").write_text(json.dumps(loupe))
    assert LocalPolicy(ckpt).prompt_style == "full"
    (ckpt / "loupe.json").unlink()
    assert LocalPolicy(ckpt).prompt_style == "full"


class OneScreen(Env):
    def reset(self, task, seed):
        return _observation(30)

    def step(self, action):
        return StepResult(_observation(30), 0.0, False, {})

    def close(self):
        pass


def test_rollout_serves_a_tiny_checkpoint_the_named_prompt(tmp_path):
    policy = LocalPolicy(save_tiny_untrained(tmp_path / "tiny"), max_new_tokens=4)
    result = run_episode(OneScreen(), policy, task="click-button", seed=0, max_steps=2)
    first, second = (step.prompt for step in result.steps)
    assert first[0]["content"] == system_prompt("named")
    assert first[1]["content"] == render_observation(_observation(30), "named")
    assert 'Named: [button] "ok" x=30, y=100\n' in first[1]["content"] and "at (" not in json.dumps(second)
    assert second[-1]["content"].startswith('Named: [button] "ok" x=30, y=100\n')


def test_serve_re_renders_a_full_prompt_for_a_tiny_checkpoint(tmp_path):
    ckpt = save_tiny_untrained(tmp_path / "tiny")
    registry = ModelRegistry(str(ckpt), "v0", max_new_tokens=4)
    try:
        obs = _observation(30)
        full = render_messages(instruction=obs.instruction, observation_text=render_observation(obs), history=[])
        named = render_messages(instruction=obs.instruction, observation_text=render_observation(obs, "named"),
                                history=[], style="named")
        answers = [chat_completion(registry, {"messages": m, "max_tokens": 4}) for m in (full, named)]
    finally:
        registry.close()
    assert answers[0]["usage"] == answers[1]["usage"]
    assert answers[0]["choices"][0]["message"] == answers[1]["choices"][0]["message"]
