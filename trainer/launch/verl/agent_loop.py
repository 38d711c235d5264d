"""verl's agent loop for Loupe tasks (registered as ``loupe_agent`` by agent_loop.yaml): each trajectory is one
whole episode played through Loupe's environment service (episode.py), its tokens kept as verl keeps a multi-turn
conversation (the model's answers trained on, the screens between them masked), its reward the env's at the end.

A dataset row (``python manage.py verl_dataset``) names the episode in ``extra_info``: project, task, seed (and
the action format the model answers in). The service and token come from LOUPE_ENV_SERVICE / LOUPE_ENV_TOKEN, the
run's name from LOUPE_RL_RUN (default: verl's trainer.experiment_name).

verl is imported only when verl asks for ``LoupeAgentLoop`` (hydra resolves the name on this module), so Loupe's
environment, which has no verl, can import this module and test what it does without it."""
from __future__ import annotations

import asyncio
import os
from typing import Any
from uuid import uuid4

from trainer.launch.verl.episode import LoupeEpisode, client_from_env

MAX_TURNS = int(os.environ.get("LOUPE_MAX_TURNS", "8"))


def episode_of(extra_info: dict, *, run: str) -> LoupeEpisode:
    """The episode a dataset row names."""
    return LoupeEpisode(client_from_env(), project=int(extra_info["project"]), task=str(extra_info["task"]),
                        seed=int(extra_info["seed"]), run=run, style=extra_info.get("prompt_style", "full"),
                        action_format=extra_info.get("format", "loupe"))


def first_messages(raw_prompt: list[dict], screen: str) -> list[dict]:
    """The row's prompt with the first screen joined to its last user turn."""
    messages = [dict(m) for m in raw_prompt]
    messages[-1]["content"] = f"{messages[-1]['content']}\n{screen}"
    return messages


def _loop_class():
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

    class LoupeAgentLoop(AgentLoopBase):
        """A whole Loupe episode a trajectory."""

        def __init__(self, *args, **kwargs):
            kwargs.pop("tools", None)  # Loupe's actions are the model's text, not verl tools
            super().__init__(*args, **kwargs)
            self.response_length = self.rollout_config.response_length
            self.run_name = os.environ.get("LOUPE_RL_RUN") or str(
                self.config.get("trainer", {}).get("experiment_name", "verl"))

        async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
            episode = episode_of(kwargs["extra_info"], run=self.run_name)
            call = asyncio.get_running_loop().run_in_executor  # the service's client blocks
            messages = first_messages(list(kwargs["raw_prompt"]), await call(None, episode.start))
            try:
                runtime = await self.ct_build_initial_tokens(messages)
                prompt_ids = list(runtime)
                mask: list[int] = []
                logprobs: list[float] | None = []
                turns = 0
                while turns < MAX_TURNS and len(mask) < self.response_length:
                    out = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=runtime,
                                                             sampling_params=sampling_params)
                    merged, mask, logprobs = await self.ct_merge_assistant_token(
                        runtime, out.token_ids, mask, logprobs if out.log_probs else None,
                        assistant_logprobs=out.log_probs or None)
                    runtime = merged.token_ids
                    answer = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                    turns += 1
                    told = await call(None, episode.act, answer)
                    if told is None:
                        break
                    previous = [*messages, {"role": "assistant", "content": answer}]  # as the tokens now hold it
                    messages = [*previous, {"role": "user", "content": told}]
                    merged, mask, logprobs = await self.ct_merge_context_msg(previous, messages, runtime, mask,
                                                                             logprobs)
                    runtime = merged.token_ids
            finally:
                reward = await call(None, episode.finish)
            response = runtime[len(prompt_ids):]
            return AgentLoopOutput(
                prompt_ids=prompt_ids, response_ids=response[: self.response_length],
                response_mask=mask[: self.response_length],
                response_logprobs=logprobs[: self.response_length] if logprobs else None,
                reward_score=reward, num_turns=2 * turns + 1, metrics=AgentLoopMetrics(),
                extra_fields={"loupe_episode": episode.episode, "loupe_steps": episode.steps,
                              "loupe_void": episode.void, "turn_scores": [], "tool_rewards": []})

    return LoupeAgentLoop


def __getattr__(name: str):
    if name == "LoupeAgentLoop":
        cls = _loop_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)


__all__ = ["episode_of", "first_messages"]
