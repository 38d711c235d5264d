"""Evaluate a checkpoint in the real environment on held-out seeds.

Generation goes through agent's ``LocalPolicy`` (a text checkpoint) or trainer.vlm_serve's ``VisionPolicy`` (a
vision-language one, as ``python -m trainer serve`` runs it), and episodes through ``agent.rollout.run_episode`` (the
one rollout loop the product uses), prompted as the rollout worker prompts a deployment of the checkpoint: in its
action format, with its screenshot and ``history_images`` earlier ones when it reads images. So an eval success rate
means what a deployment's success rate means. A task written as JSON (an authored task) comes with its JSON in
``--task-defs`` and is handed to the env as the rollout worker hands it (agent.envs.add_authored_task). Writes
``metrics.json`` (per task and overall: success rate, mean reward, mean steps, void rate and the commonest reasons of
void turns) and ``episodes.jsonl`` (one line an episode, with the screenshots each step's prompt carried).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from agent import formats
from agent.envs import EnvError, add_authored_task, make_env, tasks_for
from agent.formats import FORMATS
from agent.policies.base import Policy, PolicyError
from agent.policies.local import LocalPolicy
from agent.rollout import run_episode
from trainer.configs import EvalConfig, config_dict, parse_seeds, parse_tasks, reads_images
from trainer.model import TrainerError, read_loupe, write_metrics
from trainer.optim import Timer, emit, set_threads
from trainer.vlm_serve import VisionPolicy

log = logging.getLogger("trainer")

TOP_VOID_REASONS = 5
VOID_REASON_CHARS = 160  # a reason quotes the answer's bad piece; the cut keeps metrics.json small


def summarize(episodes: list[dict]) -> dict:
    """Success rate, mean reward, mean steps, void rate (share of void turns) of episodes, and how long the model took
    to propose a step (milliseconds: mean, median, 90th percentile)."""
    n = len(episodes)
    turns = sum(e["steps"] for e in episodes)
    latencies = sorted(ms for e in episodes for ms in e.get("latency_ms", []))
    return {
        "proposal_ms": {"mean": sum(latencies) / len(latencies), "p50": latencies[len(latencies) // 2],
                        "p90": latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]} if latencies else None,
        "episodes": n,
        "success_rate": sum(1 for e in episodes if e["reward"] > 0) / n if n else 0.0,
        "mean_reward": sum(e["reward"] for e in episodes) / n if n else 0.0,
        "mean_steps": turns / n if n else 0.0,
        "void_rate": sum(e["void_turns"] for e in episodes) / turns if turns else 0.0,
        "void_reasons": [{"reason": reason, "turns": count} for reason, count in
                         Counter(r for e in episodes for r in e.get("void_reasons", [])).most_common(TOP_VOID_REASONS)],
    }


def prompting(config: EvalConfig) -> dict:
    """How the checkpoint is prompted and read, as run_episode's keyword arguments (what the rollout worker passes
    for a deployment of it): ``--action-format`` or its loupe.json's (else loupe); its screenshot when it reads
    images (loupe.json's ``reads_images``, else whether config.json has a vision part), with ``--history-images``
    earlier ones; its image processor's pixel limits (the grid UI-TARS points on). TrainerError when these do not fit
    the checkpoint."""
    try:
        model_config = json.loads((Path(config.init) / "config.json").read_text())
        recorded = read_loupe(config.init)
    except (OSError, ValueError) as exc:
        raise TrainerError(f"--init {config.init}: cannot read its config.json / loupe.json ({exc})") from None
    if not isinstance(model_config, dict) or not isinstance(recorded, dict):
        raise TrainerError(f"--init {config.init}: config.json and loupe.json must each hold a JSON object")
    vision = reads_images(config.init)  # the architecture; loupe.json may still say it is sent no screenshots
    action_format = config.action_format or recorded.get("action_format") or "loupe"
    if action_format not in FORMATS:
        raise TrainerError(f"--init {config.init}: its loupe.json names the answer format {action_format!r}; "
                           f"expected one of: {', '.join(FORMATS)}")
    reads = recorded.get("reads_images", vision)
    if not isinstance(reads, bool):
        raise TrainerError(f"--init {config.init}: its loupe.json's reads_images must be true or false, got {reads!r}")
    if reads and not vision:
        raise TrainerError(f"--init {config.init}: its loupe.json says it reads images, but its config.json has no "
                           f"vision_config: a text model cannot be sent screenshots")
    if config.history_images < 0:
        raise TrainerError(f"--history-images must be 0 or more, got {config.history_images}")
    if config.history_images and not reads:
        raise TrainerError(f"--history-images {config.history_images}: --init {config.init} does not read "
                           f"screenshots, so it cannot be sent earlier ones")
    return {"action_format": action_format, "with_image": reads, "history_images": config.history_images,
            "vision": vision, "pixels": formats.pixel_limits(config.init)}


def load_policy(config: EvalConfig, vision: bool) -> Policy:
    """The checkpoint behind the Policy interface: VisionPolicy for a vision-language model (trainer/vlm_serve.py,
    the generation ``python -m trainer serve`` runs), LocalPolicy for a text one."""
    try:
        if vision:
            import torch

            torch.manual_seed(config.seed)  # what samples, when temperature > 0
            return VisionPolicy(config.init, temperature=config.temperature, max_new_tokens=config.max_new_tokens)
        return LocalPolicy(config.init, temperature=config.temperature, max_new_tokens=config.max_new_tokens,
                           seed=config.seed)
    except PolicyError as exc:
        raise TrainerError(str(exc)) from None


def task_definitions(config: EvalConfig, tasks: list[str]) -> dict[str, dict]:
    """The JSON of each of ``tasks`` that is written as JSON (an authored task), from ``--task-defs`` (task name ->
    ``{"env_kind", "definition"}``); the rest must be tasks the env ships. TrainerError, naming the file and the task,
    for a file that cannot be read and a task the env would not know."""
    entries: dict = {}
    if config.task_defs:
        try:
            entries = json.loads(Path(config.task_defs).read_text())
        except (OSError, ValueError) as exc:
            raise TrainerError(f"--task-defs {config.task_defs}: cannot read it as JSON ({exc})") from None
        if not isinstance(entries, dict):
            raise TrainerError(f"--task-defs {config.task_defs}: expected a JSON object of task name -> "
                               "{\"env_kind\", \"definition\"}")
    try:
        shipped = tasks_for(config.env)
    except ValueError as exc:
        raise TrainerError(f"--env {config.env}: {exc}") from None
    definitions = {}
    for task in tasks:
        entry = entries.get(task)
        if entry is None:
            if task not in shipped:
                raise TrainerError(f"--tasks {task}: not a {config.env} task; give its JSON in --task-defs if it is "
                                   "written as JSON")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("definition"), dict):
            raise TrainerError(f"--task-defs {config.task_defs}: {task} needs a \"definition\" object (the task's "
                               "JSON)")
        if entry.get("env_kind") != config.env:
            raise TrainerError(f"--task-defs {config.task_defs}: {task} is a {entry.get('env_kind')!r} task, but "
                               f"--env is {config.env}")
        definitions[task] = entry["definition"]
    return definitions


def add_definitions(env, definitions: dict[str, dict]) -> None:
    """Teach ``env`` each authored task, as the rollout worker does before an episode of one."""
    for task, definition in definitions.items():
        try:
            added = add_authored_task(env, definition)
        except EnvError as exc:
            raise TrainerError(f"--task-defs {task}: {exc}") from None
        if added != task:
            raise TrainerError(f"--task-defs {task}: its JSON defines the task {added!r}, not {task!r}")


def evaluate(config: EvalConfig) -> dict:
    """Roll ``config.init`` out on every (task, seed); write and return the metrics."""
    if not config.init or not (Path(config.init) / "config.json").is_file():
        raise TrainerError(f"--init {config.init!r} is not a checkpoint dir (no config.json there)")
    if not config.out:
        raise TrainerError("--out is required: the dir to write metrics.json to")
    try:
        tasks, seeds = parse_tasks(config.tasks), parse_seeds(config.seeds)
    except ValueError as exc:
        raise TrainerError(f"--seeds {config.seeds!r}: {exc}") from None
    if not tasks or not seeds:
        raise TrainerError("eval needs --tasks and --seeds")
    definitions = task_definitions(config, tasks)
    prompt = prompting(config)
    vision = prompt.pop("vision")
    set_threads(config.threads)
    # MiniWoB episodes restarted inside the loaded page: the same seeded episodes, far cheaper resets
    env = make_env(config.env, **({"fresh_context": False} if config.env == "miniwob" else {}))
    try:
        add_definitions(env, definitions)  # JSON the env refuses is said before the model loads
        policy = load_policy(config, vision)
        out = Path(config.out)
        out.mkdir(parents=True, exist_ok=True)
        timer = Timer()
        episodes: list[dict] = []
        total = len(tasks) * len(seeds)
        with open(out / "episodes.jsonl", "w") as fh:
            for task in tasks:
                for seed in seeds:
                    result = run_episode(env, policy, task=task, seed=seed, max_steps=config.max_episode_steps,
                                         **prompt)
                    record = {
                        "task": task,
                        "seed": seed,
                        "reward": float(result.reward),
                        "steps": len(result.steps),
                        "void_turns": sum(1 for step in result.steps if step_is_void(step)),
                        "void_reasons": [void_reason(step) for step in result.steps if step_is_void(step)],
                        "end_reason": str(result.end_reason),
                        "error": result.error,
                        "outputs": [step_output(step) for step in result.steps],
                        "latency_ms": [round(step.output.latency_ms, 1) for step in result.steps
                                       if step.output is not None and step.output.latency_ms is not None],
                        "prompt_images": [prompt_images(step.prompt) for step in result.steps],
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
        "prompting": prompt,
        "config": config_dict(config),
        "eval_seconds": timer.elapsed(),
    }
    write_metrics(out, metrics)
    return metrics


def step_is_void(step) -> bool:
    """Whether a rollout step's turn (an agent.rollout.StepRecord) did not parse."""
    return bool(step.turn.is_void)


def void_reason(step) -> str:
    """Why a void step's turn did not parse, cut to :data:`VOID_REASON_CHARS`."""
    return (step.turn.void_reason or "void")[:VOID_REASON_CHARS]


def step_output(step) -> str:
    """The raw model output of a rollout step (the turn's text where a person acted)."""
    return step.output.text if step.output is not None else step.turn.to_text()


def prompt_images(prompt: list[dict]) -> int:
    """How many screenshots a step's prompt (OpenAI-style messages) carried."""
    return sum(1 for message in prompt if isinstance(message.get("content"), list)
               for part in message["content"] if part.get("type") == "image_url")
