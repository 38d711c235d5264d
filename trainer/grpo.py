"""GRPO of every Hugging Face checkpoint through TRL's GRPOTrainer: ``python -m trainer rl --init <dir>``.

One path for text models (SmolLM2, the tests' tiny random Llama) and vision-language ones (Qwen2.5-VL, UI-TARS): a row
is one step to act on, the policy samples ``group_size`` answers to it, each answer is read in the row's answer format
(agent.formats) and scored, and GRPOTrainer turns the scores into group-relative advantages and a clipped
policy-gradient loss on the answers' tokens alone (the prompt, and its screenshot where there is one, are only
context). Rows are agent.rows.GRPORow records (the flywheel writes them from an RL snapshot: one a step, with an env
reward replaying the episode's actions before it)::

    {"messages": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
     "images": ["images/s3.png"], "format": "uitars", "width": 160, "height": 210, "reward": {...}}

A text model's rows have no ``images`` (its prompt describes the screen in words) and the screen's ``width`` x
``height`` as numbers (only a format that resizes coordinates needs them; Loupe's reads screen pixels as written). A
vision-language model's ``images`` go to the last user turns as in trainer/vlm.py (one image: the screen of the last
turn); ``width`` x ``height`` is that screenshot's size (read from the image when left out; a row whose numbers
disagree with its image is refused). ``reward`` says how an answer is scored: trainer/rewards.py holds its two
kinds, both rule rewards on real outcomes, and the reward of an answer its format cannot read.

Options (RLConfig) map onto GRPOConfig: ``group_size`` -> num_generations, ``batch_tokens // max_length`` prompts a
step (each sampled ``group_size`` times), ``max_new_tokens`` -> max_completion_length, ``temperature``, ``kl_coef``
-> beta (the k3 KL to the frozen init; with LoRA, the adapter disabled), ``eps_low``/``eps_high`` -> epsilon /
epsilon_high, ``ppo_epochs`` -> num_iterations, ``loss_type``, ``scale_rewards``, ``vllm`` (colocate | server)
-> use_vllm / vllm_mode, ``vllm_server`` -> vllm_server_base_url. Optimizer, schedule, progress
lines, ``max_steps`` / ``max_seconds`` and the checkpoint dir are trl_trainers.py's. PPO with a critic (GAE) has no
trainer in TRL 1.16 and none of Loupe's own: ``--advantage gae`` is refused (its math stays in core_algos.py).
Whole episodes sampled online (``--tasks``) need GRPO over a live environment (TRL's ``environment_factory``), which
this row-by-row path is not: refused here, saying so.
"""

from __future__ import annotations

import io
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, List, Value
from PIL import Image as PILImage
from trl import GRPOConfig, GRPOTrainer

from agent import formats
from agent import rows as R
from trainer import data as D
from trainer import distributed
from trainer.callbacks import Progress
from trainer.configs import RLConfig
from trainer.model import Loaded, TrainerError, resolve_device, run_style
from trainer.optim import log_interval, set_seed, set_threads, stop_report
from trainer.rewards import REWARD_KINDS, AnswerReward, EnvReward, Envs, Step
from trainer.trl_trainers import (
    IMAGES,
    PARTS,
    TEXT_MESSAGE,
    LoupeSchedule,
    load_model,
    own_stdout,
    save_run,
    schedule,
    trainer_args,
)
from trainer.vlm import image_ref, structured

log = logging.getLogger("trainer")


def _screen_size(row: R.GRPORow, ref: dict, where: str) -> tuple[int, int]:
    try:
        with PILImage.open(ref["path"] or io.BytesIO(ref["bytes"])) as image:
            size = image.size
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same error to the person
        raise TrainerError(f"{where}: the screenshot is not an image PIL can read: {exc}") from None
    if row.width is None:
        return size
    if (row.width, row.height) != size:
        raise TrainerError(f"{where}: width x height say {row.width}x{row.height} but the screenshot is "
                           f"{size[0]}x{size[1]}: coordinates would be read on the wrong screen")
    return size


def read_rows(path: str | os.PathLike, style: str | None = None, action_format: str | None = None,
              vision: bool = True) -> tuple[list[dict], dict[int, Step]]:
    """The rows (agent.rows.GRPORow) as TRL prompts (``prompt``: structured with ``images`` for a vision-language
    model, plain messages for a text one; ``row``: the line number, as vlm.py numbers rows) and, by line number, the
    :class:`Step` each answer is scored by. A row rendered for another answer format than ``action_format`` or
    another prompt style than ``style`` is refused (None: not checked; legacy rows without ``rendered_for`` pass), and
    so is a row with screenshots for a text model. Every error names the file and line."""
    base = Path(path).resolve().parent
    prompts, steps = [], {}
    for lineno, raw in D.read_jsonl(path):
        where = f"{path}:{lineno}"
        if isinstance(raw, dict) and "steps" in raw and "messages" not in raw:
            raise TrainerError(f"{where}: a whole-episode RL row, as RL snapshots were written before RL trained "
                               "through TRL; GRPO samples answers to one step at a time: freeze the RL snapshot "
                               "again (its rows are steps now)")
        try:
            row = R.GRPORow.from_dict(raw, where)
        except ValueError as exc:
            raise TrainerError(str(exc)) from None
        D.check_rendered_for(row.rendered_for, where, action_format=action_format, style=style)
        if vision and not row.images:
            raise TrainerError(f"{where}: an RL row needs 'images' for a vision-language model: the screenshot the "
                               "answer acts on (a path or a data:image/...;base64 URI)")
        if not vision and row.images:
            raise TrainerError(f"{where}: the row has screenshots (rendered for a checkpoint that reads them), and "
                               "--init is a text model, which reads the screen as words: freeze the snapshot for it")
        if vision:
            refs = [image_ref(spec, base, f"{where}: images[{i}]") for i, spec in enumerate(row.images)]
            width, height = _screen_size(row, refs[-1], f"{where}: images[{len(refs) - 1}]")
            prompt = {"prompt": structured(row.messages, len(refs), where), "images": refs, "row": lineno}
        else:
            if row.width is None and row.format != "loupe":
                raise TrainerError(f"{where}: a {row.format} answer's coordinates are read on the screen's size: "
                                   "give the row its width and height")
            width, height = row.width or 0, row.height or 0  # Loupe's format reads screen pixels as written
            prompt = {"prompt": row.messages, "row": lineno}
        reward = REWARD_KINDS[row.reward["kind"]].read(row.reward, f"{where}: reward")
        steps[lineno] = Step(row.format, width, height, reward, where)
        prompts.append(prompt)
    return prompts, steps


def check_options(config: RLConfig) -> None:
    """Refuse what GRPO cannot honour, each with what to do instead."""
    if config.advantage != "grpo":
        raise TrainerError("--advantage gae: PPO with a critic has no trainer here (TRL 1.16 has none, and Loupe keeps "
                           "no loop of its own; the GAE math is in trainer/core_algos.py): train GRPO through TRL, "
                           "--advantage grpo")
    if not config.data:
        raise TrainerError("--data is required: the JSONL of step rows to sample answers to")
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    if config.group_size < 2:
        raise TrainerError("--group-size must be at least 2: GRPO's baseline is the other answers of the group")
    if config.temperature <= 0:
        raise TrainerError("--temperature must be above 0: GRPO compares sampled answers, and greedy ones are alike")
    if config.max_new_tokens < 1:
        raise TrainerError("--max-new-tokens must be at least 1")
    if config.vllm:
        check_vllm(config)


def check_vllm(config: RLConfig) -> None:
    """--vllm needs what TRL's vLLM generation needs: vLLM importable in this process (both modes: in server mode
    the trainer pushes its weights to the server over NCCL through vLLM's communicator) and GPUs."""
    from trl.import_utils import is_vllm_available

    if resolve_device(config.device).type != "cuda":
        raise TrainerError(f"--vllm {config.vllm}: vLLM generates on GPUs, and this run trains on the CPU; leave "
                           "--vllm out (transformers' generate)")
    if not is_vllm_available():
        raise TrainerError(f"--vllm {config.vllm}: vLLM is not installed in this environment (TRL 1.16 takes vLLM "
                           "0.22 to 0.31): train GRPO with vLLM in a training image that has it (trainer/README.md), "
                           "or leave --vllm out")


def vllm_args(config: RLConfig) -> dict:
    """GRPOConfig's vLLM arguments for ``--vllm``: none without it."""
    if not config.vllm:
        return {}
    server = {"vllm_server_base_url": config.vllm_server.rstrip("/")} if config.vllm == "server" else {}
    return {"use_vllm": True, "vllm_mode": config.vllm, **server}


class GRPOProgress(Progress):
    """trl_trainers' progress lines; a step that trains again on the last generation's answers (``ppo_epochs`` > 1) has
    no new rewards, so it reports that generation's, which are the rewards of the answers it trained on."""

    CARRIED = ("reward", "reward_std", "void")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.last: dict[str, float] = {}
        self.rewards: list[float] = []  # the mean reward of each generation, in order

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            if "reward" in logs:
                self.last = {k: logs[k] for k in self.CARRIED if k in logs}
                self.rewards.append(float(logs["reward"]))
            else:
                logs = {**self.last, **logs}
        return super().on_log(args, state, control, logs=logs, **kwargs)


@dataclass
class Run:
    """A prepared GRPO run: the trainer, the reward (with its counts and envs) and how progress is kept."""

    trainer: GRPOTrainer
    loaded: Loaded
    reward: AnswerReward
    progress: GRPOProgress
    planned: int
    rows: int
    workdir: tempfile.TemporaryDirectory
    vision: bool

    def close(self) -> None:
        self.reward.envs.close()
        self.workdir.cleanup()


def prepare_grpo(config: RLConfig) -> Run:
    """Read and check the rows, start the envs their rewards need, load the init and build the GRPOTrainer."""
    check_options(config)
    vision = config.reads_images
    prompts, steps = read_rows(config.data, run_style(config),
                               D.init_action_format(config.init, config.action_format), vision)
    envs = Envs()
    try:
        probed: set[tuple[str, str]] = set()
        for step in steps.values():
            if isinstance(step.reward, EnvReward) and (step.reward.env, step.reward.task) not in probed:
                envs.probe(step.reward, f"{step.where}: reward")
                probed.add((step.reward.env, step.reward.task))
        return _build(config, prompts, steps, envs, vision)
    except BaseException:
        envs.close()
        raise


def _build(config: RLConfig, prompts: list[dict], steps: dict[int, Step], envs: Envs, vision: bool) -> Run:
    set_threads(config.threads)
    # this rank's GPU (cuda:LOCAL_RANK under torchrun), as SFT and DPO take it (trl_trainers._plan): without it every
    # rank of a multi-GPU run loaded its model onto cuda:0
    device = distributed.device_of(resolve_device(config.device))
    dtype = distributed.weights_dtype(config, device)  # a full fine-tune on a GPU: float32 under bf16 autocast
    per_step = min(len(prompts), max(1, config.batch_tokens // max(config.max_length, 1)))
    batch = per_step * config.group_size  # answers a step: TRL's batch counts completions
    planned = config.max_steps
    style = run_style(config)  # recorded in loupe.json; the rows keep the prompts they were acted on
    workdir = tempfile.TemporaryDirectory(prefix="loupe-grpo-")
    common = {k: v for k, v in trainer_args(config, device, dtype, planned, batch, workdir.name).items()
              if k != "max_length"}  # GRPOConfig has no max_length: nothing is cut, as in SFT of a VLM
    # the TRL config before the model, as SFT and DPO make theirs: it sets up accelerate's state (the process group)
    # and, under ZeRO-3, makes from_pretrained load the weights partitioned instead of whole on every GPU
    args = GRPOConfig(**common, num_generations=config.group_size, max_completion_length=config.max_new_tokens,
                      temperature=config.temperature, beta=config.kl_coef, epsilon=config.eps_low,
                      epsilon_high=config.eps_high, num_iterations=config.ppo_epochs, loss_type=config.loss_type,
                      scale_rewards=config.scale_rewards, log_completions=False, **vllm_args(config))
    set_seed(config.seed)  # after the process group is up: every rank draws the same LoRA init
    loaded = load_model(config, device, dtype, style, vision=vision)
    progress = GRPOProgress(config, planned, log_interval(config, planned),
                            {"loss": "loss", "reward": "reward", "reward_std": "reward_std", "void": "void",
                             "kl": "kl", "entropy": "entropy", "lr": "learning_rate", "grad_norm": "grad_norm"})
    reward = AnswerReward(steps, config.void_reward, envs, formats.pixel_limits(config.init))
    columns = {"prompt": List(PARTS), "images": IMAGES} if vision else {"prompt": List(TEXT_MESSAGE)}
    train = Dataset.from_list(prompts, features=Features({**columns, "row": Value("int64")}))
    trainer = LoupeGRPOTrainer(model=loaded.model, reward_funcs=[reward], args=args, train_dataset=train,
                               processing_class=loaded.tokenizer, callbacks=[progress],
                               lr_factor=schedule(config, progress))
    own_stdout(trainer)
    log.info("grpo: %d rows (%d with env rewards), %d prompts x %d answers a step, device %s %s%s", len(prompts),
             sum(isinstance(s.reward, EnvReward) for s in steps.values()), per_step, config.group_size, device, dtype,
             ", LoRA" if loaded.is_lora else "")
    return Run(trainer, loaded, reward, progress, planned, len(prompts), workdir, vision)


class LoupeGRPOTrainer(LoupeSchedule, GRPOTrainer):
    """TRL's GRPOTrainer with Loupe's optimizer and schedule, both made after the model is wrapped (DDP, FSDP,
    DeepSpeed refuse an optimizer made outside)."""


def _save(run: Run, config: RLConfig, metrics: dict) -> None:
    """Rank 0 writes the checkpoint; every rank calls this (trl_trainers.save_run gathers a sharded model, checks that
    unsharded ranks hold the same weights and drops the frozen "ref" adapter GRPO keeps as its KL reference)."""
    if run.reward.trace:
        run.reward.trace.write({"weights_sha256": distributed.weights_digest(run.loaded.model)})
    save_run(run.trainer, run.loaded, config, "rl", metrics)


def train_prepared(run: Run, config: RLConfig) -> dict:
    """Train a prepared run, save the checkpoint to ``config.out`` and return the metrics; closes the run."""
    try:
        run.trainer.train()
        history = run.progress.history
        if not history:
            raise TrainerError("no optimizer step ran (max_steps 0?)")
        seconds = run.progress.timer.elapsed()
        rewards, counts = run.progress.rewards, run.reward.counts()  # every rank's answers, not rank 0's share
        tail = history[-min(len(history), 10):]
        metrics = {"algorithm": "rl", "advantage": "grpo",
                   "model": "vlm" if run.vision else "text", "steps": len(history), "rows": run.rows,
                   "group_size": config.group_size, "first_loss": history[0]["loss"],
                   "final_loss": sum(h["loss"] for h in tail) / len(tail),
                   "reward_first": rewards[0], "reward_last": rewards[-1], "reward_mean": sum(rewards) / len(rewards),
                   "answers": counts["answers"], "answers_rewarded": counts["rewarded"], "void_answers": counts["void"],
                   "void_share": counts["void"] / max(counts["answers"], 1), "env_episodes": counts["env_episodes"],
                   "env_steps": counts["env_steps"], "env_failures": counts["env_failures"], "train_seconds": seconds,
                   "seconds_per_step": seconds / len(history), "prompt_style": run.loaded.prompt_style,
                   "planned_steps": run.planned,
                   **stop_report(config, steps=len(history), planned=run.planned, rows=run.rows, what="rows",
                                 timed_out=run.progress.timed_out)}
        if "kl" in history[-1]:
            metrics["final_kl"] = history[-1]["kl"]
        _save(run, config, metrics)
        return metrics
    finally:
        run.close()


def train_grpo(config: RLConfig) -> dict:
    """GRPO of ``config.init`` (a text or a vision-language checkpoint) on ``config.data``'s step rows; saves to
    ``config.out`` and returns the metrics."""
    return train_prepared(prepare_grpo(config), config)


__all__ = ["check_vllm", "prepare_grpo", "read_rows", "train_grpo", "train_prepared", "vllm_args"]
