"""The cold-start recipe: checkpoint v0 by SFT of the tiny model on the scripted solvers' demonstrations.

One place for it: ``python -m trainer coldstart`` runs it, and both the flywheel's cold-start run
(flywheel/training.py, the run ``make run`` queues) and the cold-start benchmark (bench/bench_coldstart.py)
run that command; trainer/README.md ("Cold start") says what they reach and what else was tried.
"""

from __future__ import annotations

TASKS = ("click-button", "click-link", "focus-text")
SEEDS = "0-149"  # demonstrations; held-out evaluation uses seeds from 1000 on
AUGMENT = 10  # synthetic variants per solved one-step episode
QUOTE_TARGET = True  # thoughts quote the clicked element's line: the action copies numbers just written
RELABEL = 1.0  # every variant in random words: the target's name is copied from the instruction, not guessed
MAX_STEPS = 2600  # the recipe is these steps, on any machine: v0's quality must not depend on its speed
# A safety net, not the recipe: about 6 minutes of SFT on a quiet 2-core machine, 10 on a busy one. A run
# this budget cuts says so (the trainer's warnings, on the Runs page).
MAX_SECONDS = 3600
LR, WARMUP_STEPS, BATCH_TOKENS = 3e-3, 10, 2048


def run_coldstart(config) -> dict:
    """``python -m trainer coldstart``: demonstrations, then SFT from the tiny model. Progress lines carry their
    ``phase`` ("demos", then "sft"); the metrics are SFT's, with the demonstrations' counts under ``demos``."""
    from pathlib import Path

    from trainer.configs import DemosConfig, SFTConfig
    from trainer.demos import write_demos
    from trainer.model import TrainerError
    from trainer.optim import phase
    from trainer.sft import train_sft

    if not config.out:
        raise TrainerError("--out is required: the directory to write demos.jsonl and the checkpoint to")
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    demos_file = out / "demos.jsonl"
    with phase("demos"):
        demos = write_demos(DemosConfig(out=str(demos_file), tasks=config.tasks, seeds=config.seeds,
                                        augment=config.augment, quote_target=config.quote_target,
                                        relabel=config.relabel))
    if demos["rows"] == 0:
        raise TrainerError(f"the scripted solvers solved no episode of {config.tasks} on seeds {config.seeds}: "
                           "nothing to train on")
    with phase("sft"):
        metrics = train_sft(SFTConfig(data=str(demos_file), init="tiny", out=str(out / "checkpoint"),
                                      max_steps=config.max_steps, max_seconds=config.max_seconds, lr=config.lr,
                                      warmup_steps=config.warmup_steps, batch_tokens=config.batch_tokens,
                                      log_every=config.log_every, threads=config.threads))
    return {**metrics, "demos": {"rows": demos["rows"], "per_task": demos["per_task"],
                                 "seconds": demos["seconds"]}}
