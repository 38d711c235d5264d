"""Evaluate a checkpoint in the real environment on held-out seeds.

Generation goes through agent's ``LocalPolicy`` and episodes through ``agent.rollout.run_episode``
(the one generation path and the one rollout loop the product uses), so an eval success rate
means what a deployment's success rate means. Writes ``metrics.json`` (per task and overall:
success rate, mean reward, mean steps, void rate) and ``episodes.jsonl`` (one line an episode).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from trainer.configs import EvalConfig, config_dict, parse_seeds, parse_tasks
from trainer.model import TrainerError, write_metrics
from trainer.optim import Timer, emit, set_threads

log = logging.getLogger("trainer")


def summarize(episodes: list[dict]) -> dict:
    """Success rate, mean reward, mean steps and void rate (share of void turns) of episodes."""
    n = len(episodes)
    turns = sum(e["steps"] for e in episodes)
    return {
        "episodes": n,
        "success_rate": sum(1 for e in episodes if e["reward"] > 0) / n if n else 0.0,
        "mean_reward": sum(e["reward"] for e in episodes) / n if n else 0.0,
        "mean_steps": turns / n if n else 0.0,
        "void_rate": sum(e["void_turns"] for e in episodes) / turns if turns else 0.0,
    }


def evaluate(config: EvalConfig) -> dict:
    """Roll ``config.init`` out on every (task, seed); write and return the metrics."""
    from agent.envs import make_env
    from agent.policies.local import LocalPolicy
    from agent.rollout import run_episode

    if not config.init or not (Path(config.init) / "config.json").is_file():
        raise TrainerError(f"--init {config.init!r} is not a checkpoint dir (no config.json there)")
    if not config.out:
        raise TrainerError("--out is required: the dir to write metrics.json to")
    tasks, seeds = parse_tasks(config.tasks), parse_seeds(config.seeds)
    if not tasks or not seeds:
        raise TrainerError("eval needs --tasks and --seeds")
    set_threads(config.threads)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = LocalPolicy(config.init, temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                         seed=config.seed)
    # MiniWoB episodes restarted inside the loaded page: the same seeded episodes, far cheaper resets
    env = make_env(config.env, **({"fresh_context": False} if config.env == "miniwob" else {}))
    timer = Timer()
    episodes: list[dict] = []
    total = len(tasks) * len(seeds)
    try:
        with open(out / "episodes.jsonl", "w") as fh:
            for task in tasks:
                for seed in seeds:
                    result = run_episode(env, policy, task=task, seed=seed, max_steps=config.max_episode_steps)
                    record = {
                        "task": task,
                        "seed": seed,
                        "reward": float(result.reward),
                        "steps": len(result.steps),
                        "void_turns": sum(1 for step in result.steps if step_is_void(step)),
                        "end_reason": str(result.end_reason),
                        "outputs": [step_output(step) for step in result.steps],
                    }
                    episodes.append(record)
                    fh.write(json.dumps(record) + "\n")
                    emit({"step": len(episodes), "total": total, "task": task, "seed": seed,
                          "reward": record["reward"], "void": record["void_turns"] > 0})
    finally:
        env.close()
    metrics = {
        "overall": summarize(episodes),
        "per_task": {task: summarize([e for e in episodes if e["task"] == task]) for task in tasks},
        "checkpoint": str(Path(config.init).resolve()),
        "config": config_dict(config),
        "eval_seconds": timer.elapsed(),
    }
    write_metrics(out, metrics)
    return metrics


def step_is_void(step) -> bool:
    """Whether a rollout step's turn (an agent.rollout.StepRecord) did not parse."""
    return bool(step.turn.is_void)


def step_output(step) -> str:
    """The raw model output of a rollout step (the turn's text where a person acted)."""
    return step.output.text if step.output is not None else step.turn.to_text()
