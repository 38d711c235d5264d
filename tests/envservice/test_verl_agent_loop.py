"""The Loupe agent loop inside verl 0.9.1 (its own environment: README, "verl"; skipped where verl is missing): verl's
own continuous-token builders keep one whole episode's tokens, the model's answers trained on and the screens
between them masked, the reward the env's. The LLM server and the environment service are stand-ins here (no vLLM on
a CPU; the service needs Loupe's database, and tests/envservice/test_verl.py plays the episode through a real one):

    PYTHONPATH=. /tmp/verl-venv/bin/python -m pytest --noconftest -c /dev/null -p no:cacheprovider \\
        tests/envservice/test_verl_agent_loop.py
"""
from __future__ import annotations

import asyncio
import base64

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from trainer.launch.verl import agent_loop  # noqa: E402
from trainer.tokenizer import build_tokenizer  # noqa: E402

ANSWERS = ["Action: click(x=80, y=120)", "Action: type(text=\"Kasey\")", "Action: click(x=80, y=160)"]


def observation(text: str) -> dict:
    return {"instruction": "Enter \"Kasey\" and press Submit.", "url": "", "width": 160, "height": 210,
            "elements": [{"role": "button", "text": text, "x": 80, "y": 160, "width": 40, "height": 20}],
            "screen_text": "", "image_format": "jpeg", "screenshot": base64.b64encode(b"jpeg").decode()}


class Service:
    """The environment service's answers for a three-step episode; records what the loop sent."""

    def __init__(self):
        self.steps, self.calls = [], []

    def lease(self, **kwargs):
        self.calls.append(("lease", kwargs))
        return {"lease": "L1", "episode": 7, "observation": observation("screen-0")}

    def step(self, lease, action):
        self.steps.append(action)
        done = len(self.steps) == 3
        return {"done": done, "reward": 1.0 if done else 0.0, "steps": [{"actor": "model"}],
                "observation": observation(f"screen-{len(self.steps)}")}

    def end(self, lease):
        raise AssertionError("the episode ended by the env; the loop must not end it again")

    def release(self, lease):
        self.calls.append(("release", lease))


class Server:
    """verl's LLM server client: the model answers the scripted actions, one a turn."""

    def __init__(self, tokenizer):
        self.tokenizer, self.turn = tokenizer, 0

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        text = ANSWERS[self.turn] + self.tokenizer.eos_token
        self.turn += 1
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


def test_the_loupe_agent_loop_keeps_a_whole_episode_in_verls_tokens_with_the_envs_reward(monkeypatch):
    service, tokenizer = Service(), build_tokenizer()
    monkeypatch.setattr(agent_loop, "client_from_env", lambda: service)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 8192, "response_length": 4096}},
                               "trainer": {"experiment_name": "verl-cpu"}, "data": {}})
    row = {"raw_prompt": [{"role": "user", "content": "Do the task on the screen (enter-text)."}],
           "extra_info": {"project": 1, "task": "enter-text", "seed": 3, "format": "loupe"}}

    async def trajectory():  # verl makes its loops on the event loop that runs them
        loop = agent_loop.LoupeAgentLoop(trainer_config=DictConfigWrap(config), server_manager=Server(tokenizer),
                                         tokenizer=tokenizer, processor=None, dataset_cls=None,
                                         data_config=DictConfigWrap(config.data), hf_model_type="llama", tools=None)
        return await loop.run({"temperature": 1.0}, **row)

    out = asyncio.run(trajectory())

    assert service.steps == ANSWERS and service.calls[0][1]["run"] == "verl-cpu"
    assert service.calls[-1] == ("release", "L1")
    assert out.reward_score == 1.0 and out.extra_fields["loupe_episode"] == 7
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs)
    assert "screen-0" in tokenizer.decode(out.prompt_ids)  # the first screen joined the prompt
    trained = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m])
    masked = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if not m])
    assert all(a.split(": ", 1)[1] in trained for a in ANSWERS) and "screen" not in trained
    assert "screen-1" in masked and "screen-2" in masked and "click" not in masked
