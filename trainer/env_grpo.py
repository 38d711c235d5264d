"""Whole-episode GRPO through TRL's ``environment_factory``: ``python -m trainer rl-online --env-service URL ...``.

Each of GRPOTrainer's rollouts plays one whole episode of a Loupe task through the environment service
(envservice/): the environment object TRL makes per rollout (:class:`ServiceEnv`) holds a lease on the service;
``reset`` resets it to the row's task and seed and gives the model the first screen; its public methods are Loupe's
actions as tools (``click``, ``type``, ``hotkey``, ``scroll``, ``finished`` ...), each stepping the leased env and
answering with the next screen; ``get_reward`` is the episode's reward from the task's own check at its end (a model
that stops acting before the env says done has its episode ended and scored as the screen stands, through the
service's ``/end``). A tool call the service cannot read (a bad action) is stored as a void turn, answered as an
error the model sees, and costs ``void_reward`` (negative) of the episode's reward; so does an episode in which the
model never acted. GRPO's advantages are group-relative over the ``group_size`` episodes of one seed.

Every episode is an Episode in Loupe, named by the run (``--run``; Episode.rl_run), so people watch and review it as
any other; when a person takes over one from the live session page, the service answers the model's step with the
person's steps (``steps`` of its answer) and the tool's answer tells the model what the person did.

Text models read the screen as text (agent.prompt's render of the elements); a vision-language init also gets the
screenshot back after each action as an image part of the tool's answer, as TRL's image-returning tools allow.
A model whose chat template cannot render tool calls is given one of TRL's that can, whose answers TRL knows how to
parse (:func:`tool_ready`).
"""
from __future__ import annotations

import io
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from agent.actions import Action
from agent.prompt import render_observation
from envservice.client import EnvServiceClient, ServiceError, observation_of
from trainer import distributed
from trainer.configs import EnvRLConfig, parse_seeds, parse_tasks
from trainer.model import TrainerError, resolve_device, run_style
from trainer.optim import log_interval, set_seed, set_threads, stop_report

log = logging.getLogger("trainer")

SYSTEM = ("You operate a computer screen to do the task the user gives. Act with the tools, one action a call: each "
          "answers with the screen after the action. Coordinates are screen pixels. When the task is done, or it "
          "cannot be done, call finished.")


class ServiceEnv:
    """One rollout's environment for TRL: a lease on the environment service. TRL's tools are the public methods of
    the class :func:`env_class` makes from this one and the chosen :class:`Tools`."""

    def __init__(self, client: EnvServiceClient, *, project: int, task: str, run: str, style: str, images: bool,
                 void_reward: float, stats: dict):
        self._client, self._project, self._task, self._run = client, project, task, run
        self._style, self._images, self._void_reward, self._stats = style, images, void_reward, stats
        self._lease: str | None = None
        self._episode: int | None = None
        self._done = True
        self._reward: float | None = None
        self._acted = self._void = 0

    # -- TRL's hooks ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **_row) -> Any:
        """Start the episode of this rollout (the row's seed) and show its first screen."""
        if self._lease is None:
            lease = self._client.lease(project=self._project, task=self._task, seed=seed, run=self._run)
            self._lease = lease["lease"]
            self._stats["leases"].append(self._lease)
        else:
            lease = self._client.reset(self._lease, seed=seed)
        self._episode, self._done, self._reward = lease["episode"], False, None
        self._acted = self._void = 0
        self._stats["episodes"].append(self._episode)
        return self._screen(lease["observation"], "\nThe screen now:")  # TRL appends it to the user's turn

    def get_reward(self) -> float:
        """The episode's reward: the env's at its end (ended now, by the task's check, if the model stopped
        acting first), less ``void_reward`` for each void turn, and once more if the model never acted."""
        if not self._done and self._lease is not None:
            ended = self._client.end(self._lease)
            self._reward, self._done = ended.get("reward"), True
        reward = float(self._reward or 0.0)
        voids = self._void + (1 if self._acted == 0 else 0)
        self._stats["rewards"].append(reward)
        self._stats["void_turns"] += voids
        return reward + self._void_reward * voids

    def _release(self) -> None:
        if self._lease is not None:
            try:
                self._client.release(self._lease)
            except ServiceError as exc:  # already gone (expired): nothing to give back
                log.info("releasing lease %s: %s", self._lease, exc)
            self._lease = None

    # -- internals -----------------------------------------------------------------------------
    def _act(self, action: Action) -> Any:
        if self._lease is None:
            raise ValueError("No episode is running.")
        if self._done:
            raise ValueError("The episode is over; stop acting.")
        try:
            step = self._client.step(self._lease, action.to_text())
        except ServiceError as exc:
            if exc.status == 400:  # stored as a void turn; the screen is unchanged
                self._void += 1
                raise ValueError(exc.detail) from None
            if exc.status == 502:  # the env crashed: a fresh one, a new episode; this rollout's is over
                self._done, self._reward = True, 0.0
                raise ValueError("The environment failed; this episode is over.") from None
            raise
        self._acted += 1
        self._stats["env_steps"] += len(step.get("steps") or [None])
        self._done = bool(step["done"])
        if self._done:
            self._reward = step["reward"]
        head = f"reward {step['reward']:g}, done {str(self._done).lower()}."
        people = [s for s in step.get("steps") or [] if s.get("actor") != "model"]
        if people:
            self._stats["person_steps"] += len(people)
            head = ("A person took over and acted: " + "; ".join(s["action_text"] for s in people) + ". " + head)
        return self._screen(step["observation"], head + " The screen now:")

    def _screen(self, payload: dict, head: str) -> Any:
        text = f"{head}\n{render_observation(observation_of(payload), self._style)}"
        if not self._images:
            return text
        from PIL import Image

        image = Image.open(io.BytesIO(observation_of(payload).screenshot)).convert("RGB")
        return [{"type": "image", "image": image}, {"type": "text", "text": text}]


class Tools:
    """Loupe's actions as TRL tools (a method's name, typed arguments and Google-style docstring are its schema);
    :func:`env_class` gives an env the ones a run exposes. Each steps the leased env and answers with the screen."""

    def click(self, x: int, y: int) -> Any:
        """Click a point of the screen.

        Args:
            x: Horizontal pixel of the point, from the left edge.
            y: Vertical pixel of the point, from the top edge.
        """
        return self._act(Action("click", {"x": x, "y": y}))

    def double_click(self, x: int, y: int) -> Any:
        """Double-click a point of the screen.

        Args:
            x: Horizontal pixel of the point, from the left edge.
            y: Vertical pixel of the point, from the top edge.
        """
        return self._act(Action("double_click", {"x": x, "y": y}))

    def type(self, text: str) -> Any:  # noqa: A003 - the action's name in Loupe's grammar
        """Type text into the focused field.

        Args:
            text: The text to type.
        """
        return self._act(Action("type", {"text": text}))

    def hotkey(self, keys: str) -> Any:
        """Press a key or a combination of keys.

        Args:
            keys: The keys joined by +, e.g. enter or ctrl+a.
        """
        return self._act(Action("hotkey", {"keys": keys}))

    def scroll(self, x: int, y: int, direction: str) -> Any:
        """Scroll the page at a point.

        Args:
            x: Horizontal pixel of the point.
            y: Vertical pixel of the point.
            direction: up or down.
        """
        return self._act(Action("scroll", {"x": x, "y": y, "direction": direction}))

    def finished(self, answer: str) -> Any:
        """Say the task is done (or cannot be done), with the answer where the task asks for one.

        Args:
            answer: The answer the task asks for, or an empty string.
        """
        return self._act(Action("finished", {"answer": answer}))


TOOLS = tuple(name for name in vars(Tools) if not name.startswith("_"))


def env_class(actions: list[str] | tuple[str, ...] = TOOLS) -> type[ServiceEnv]:
    """A ServiceEnv whose tools are ``actions`` (Loupe's action names): a smaller schema in every prompt, for a
    task that needs only a few. ValueError naming the unknown ones."""
    unknown = [a for a in actions if a not in TOOLS]
    if unknown or not actions:
        raise ValueError(f"unknown tools {', '.join(unknown) or '(none given)'}; choose from: {', '.join(TOOLS)}")
    return type("LoupeEnv", (ServiceEnv,), {a: vars(Tools)[a] for a in actions})


def tool_ready(tokenizer, model) -> None:
    """Give a chat template that cannot render tool calls one of TRL's that can and whose answers TRL parses: Qwen3-VL's
    for a vision-language processor (the same image tokens as Qwen2.5-VL's), Qwen2.5's (ChatML with <tool_call> tags)
    for a text tokenizer. A turn then ends at <|im_end|>, so generation stops there (a token of its own, added where
    the vocabulary lacks it: the tiny model's)."""
    from transformers import ProcessorMixin
    from trl.chat_template_utils import qwen2_5_chat_template, qwen3_vl_chat_template, supports_tool_calling

    inner = getattr(tokenizer, "tokenizer", tokenizer)
    if supports_tool_calling(tokenizer):
        return
    template = qwen3_vl_chat_template if isinstance(tokenizer, ProcessorMixin) else qwen2_5_chat_template
    tokenizer.chat_template = inner.chat_template = template
    markers = ["<|im_start|>", "<|im_end|>"]
    if any(inner.convert_tokens_to_ids(m) in (None, inner.unk_token_id) for m in markers):
        inner.add_special_tokens({"additional_special_tokens": markers})
        model.resize_token_embeddings(len(inner))
    inner.eos_token = "<|im_end|>"
    model.config.eos_token_id = model.generation_config.eos_token_id = inner.eos_token_id


def rows_of(config: EnvRLConfig) -> list[dict]:
    """One prompt a seed: the task named, the first screen added by ``reset``."""
    try:
        seeds = parse_seeds(config.seeds)
    except ValueError as exc:
        raise TrainerError(f"--seeds {config.seeds!r}: {exc}") from None
    ask = f"Do the task on the screen ({config.task})."
    return [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}], "seed": seed}
            for seed in seeds]


def check_options(config: EnvRLConfig) -> str:
    """The caller's token; TrainerError for what cannot run (before anything loads)."""
    token = config.token or os.environ.get("LOUPE_ENV_TOKEN", "")
    if not config.env_service:
        raise TrainerError("--env-service is required: the environment service's URL (python manage.py envservice)")
    if not token:
        raise TrainerError("a token is required: --token, or LOUPE_ENV_TOKEN (a project manager's API token)")
    if not config.project or not config.task:
        raise TrainerError("--project and --task are required: the project's task the episodes play")
    if config.group_size < 2:
        raise TrainerError("--group-size must be at least 2: GRPO's advantages compare the episodes of one seed")
    if not config.out:
        raise TrainerError("--out is required: the checkpoint dir")
    try:
        env_class(parse_tasks(config.tools) or TOOLS)
    except ValueError as exc:
        raise TrainerError(f"--tools {config.tools!r}: {exc}") from None
    rows_of(config)  # the seeds read
    return token


def train_env_grpo(config: EnvRLConfig) -> dict:
    """Train ``config.init`` by whole-episode GRPO on the service's episodes; saves to ``config.out``."""
    # trl, datasets and peft take seconds to import: bad options and an unreachable service are said before
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from trainer.callbacks import Progress
    from trainer.trl_trainers import LoupeSchedule, load_model, own_stdout, save_run, schedule, trainer_args

    token = check_options(config)
    client = EnvServiceClient(config.env_service, token, timeout=900)  # a step waits while a person has taken over
    try:
        client.status()
    except (ServiceError, OSError) as exc:
        raise TrainerError(f"cannot use the environment service at {config.env_service}: {exc}") from None
    vision = config.reads_images
    run = config.run or Path(config.out).name
    rows = rows_of(config)
    set_threads(config.threads)
    device = distributed.device_of(resolve_device(config.device))
    dtype = distributed.weights_dtype(config, device)
    batch = config.prompts_per_step * config.group_size
    workdir = tempfile.TemporaryDirectory(prefix="loupe-env-grpo-")
    common = {k: v for k, v in trainer_args(config, device, dtype, config.max_steps, batch, workdir.name).items()
              if k != "max_length"}
    args = GRPOConfig(**common, num_generations=config.group_size, max_completion_length=config.max_new_tokens,
                      temperature=config.temperature, beta=config.kl_coef, epsilon=config.eps_low,
                      epsilon_high=config.eps_high, num_iterations=config.ppo_epochs, loss_type=config.loss_type,
                      scale_rewards=config.scale_rewards, log_completions=False,
                      max_tool_calling_iterations=config.max_turns)
    set_seed(config.seed)
    style = run_style(config)
    loaded = load_model(config, device, dtype, style, vision=vision)
    tool_ready(loaded.tokenizer, loaded.model)
    stats: dict = {"leases": [], "episodes": [], "rewards": [], "env_steps": 0, "void_turns": 0, "person_steps": 0}
    made: list[ServiceEnv] = []
    cls = env_class(parse_tasks(config.tools) or TOOLS)

    def factory() -> ServiceEnv:
        env = cls(client, project=config.project, task=config.task, run=run, style=style, images=vision,
                         void_reward=config.void_reward, stats=stats)
        made.append(env)
        return env

    progress = Progress(config, config.max_steps, log_interval(config, config.max_steps),
                        {"loss": "loss", "reward": "reward", "reward_std": "reward_std", "kl": "kl",
                         "lr": "learning_rate", "grad_norm": "grad_norm"})

    class Trainer(LoupeSchedule, GRPOTrainer):
        pass

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    try:
        trainer = Trainer(model=loaded.model, args=args, train_dataset=Dataset.from_list(rows),
                          processing_class=loaded.tokenizer, environment_factory=factory, callbacks=[progress],
                          lr_factor=schedule(config, progress))
        own_stdout(trainer)
        log.info("rl-online: task %s of project %d through %s, run %r, %d seeds, %d episodes a step", config.task,
                 config.project, config.env_service, run, len(rows), batch)
        started = time.monotonic()
        try:
            trainer.train()
        except ServiceError as exc:  # an unknown task, a project the token may not use, a full pool: one line
            raise TrainerError(f"the environment service refused: {exc}") from None
        history = progress.history
        if not history:
            raise TrainerError("no optimizer step ran (max_steps 0?)")
        rewards = stats["rewards"]
        metrics = {"algorithm": "rl", "advantage": "grpo", "online": True, "run": run, "task": config.task,
                   "model": "vlm" if vision else "text", "steps": len(history), "group_size": config.group_size,
                   "first_loss": history[0]["loss"], "final_loss": history[-1]["loss"],
                   "episodes": len(stats["episodes"]), "episode_ids": stats["episodes"],
                   "episode_rewards": rewards, "reward_mean": sum(rewards) / max(len(rewards), 1),
                   "env_steps": stats["env_steps"], "void_turns": stats["void_turns"],
                   "person_steps": stats["person_steps"], "leases": len(stats["leases"]),
                   "train_seconds": time.monotonic() - started,
                   **stop_report(config, steps=len(history), planned=config.max_steps, rows=len(rows), what="seeds",
                                 timed_out=progress.timed_out)}
        Path(config.out).mkdir(parents=True, exist_ok=True)
        seeds_file = Path(config.out) / "online_seeds.jsonl"  # what the checkpoint's data digest names
        seeds_file.write_text("".join(json.dumps({"task": config.task, "seed": r["seed"]}) + "\n" for r in rows))
        config.data = str(seeds_file)
        save_run(trainer, loaded, config, "rl", metrics)
        return metrics
    finally:
        for env in made:
            env._release()
        workdir.cleanup()


__all__ = ["ServiceEnv", "TOOLS", "Tools", "env_class", "rows_of", "tool_ready", "train_env_grpo"]
