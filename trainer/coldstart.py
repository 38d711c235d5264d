"""The cold-start recipe: checkpoint v0 by SFT of the tiny model on the scripted solvers' demonstrations.

One place for it: the flywheel's cold-start run (flywheel/training.py, the run ``make run`` queues) and
the cold-start benchmark (bench/bench_coldstart.py) both take these values; trainer/README.md ("Cold
start") says what they reach and what else was tried.
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
SFT_ARGS = ("--lr", "3e-3", "--warmup-steps", "10", "--batch-tokens", "2048")


def demos_args(tasks=TASKS, seeds: str = SEEDS, augment: int = AUGMENT, quote_target: bool = QUOTE_TARGET,
               relabel: float = RELABEL) -> list[str]:
    """``python -m trainer demos`` options of the recipe, or of the values a run recorded (``--out`` is the
    caller's)."""
    return ["--tasks", ",".join(tasks), "--seeds", seeds, "--augment", str(augment),
            *(["--quote-target"] if quote_target else []), "--relabel", str(relabel)]


def sft_args(max_steps: int = MAX_STEPS, max_seconds: int = MAX_SECONDS) -> list[str]:
    """``python -m trainer sft`` options of the recipe (``--data``, ``--init tiny``, ``--out`` are the caller's)."""
    return ["--max-steps", str(max_steps), "--max-seconds", str(max_seconds), *SFT_ARGS]
