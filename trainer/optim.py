"""What the trainers share: seeding, the warmup + decay schedule (trl_trainers hands it to TRL's trainers), the
step plan and stop report, progress lines.

Progress goes to stdout as one JSON object a line (the Django train worker parses it); human
logs go to stderr through ``logging``.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time

import torch


def set_seed(seed: int) -> random.Random:
    """Seed torch and Python; returns a private RNG for data order."""
    torch.manual_seed(seed)
    random.seed(seed)
    return random.Random(seed)


def set_threads(threads: int) -> None:
    if threads > 0:
        torch.set_num_threads(threads)


def lr_factor(step: int, *, warmup: int, total: int, schedule: str, time_progress: float = 0.0) -> float:
    """Multiplier of the peak learning rate at ``step`` (0-based): linear warmup, then decay to 10 %.

    ``time_progress`` (elapsed / time budget) moves the decay along when a time budget, not the
    step count, is what ends the run, so a budget-bound run still ends at a low learning rate.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, max((step - warmup) / max(1, total - warmup), time_progress))
    if schedule == "linear":
        return 1.0 - 0.9 * progress
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def planned_steps(config, batches_per_epoch: int) -> int:
    """The steps a run will take: ``max_steps``, or fewer when ``max_epochs`` passes over the data come first
    (a few rows trained for hundreds of steps are only memorised)."""
    cap = getattr(config, "max_epochs", 0)
    if cap and batches_per_epoch:
        return max(1, min(config.max_steps, int(cap * batches_per_epoch)))
    return config.max_steps


def log_interval(config, planned: int) -> int:
    """Steps between progress lines: ``log_every``, unless that gives a short run a single point, which draws
    no curve: then about five points."""
    if planned >= 2 * config.log_every:
        return config.log_every
    return max(1, planned // 5)


def stop_report(config, *, steps: int, planned: int, rows: int, what: str, timed_out: bool) -> dict:
    """How a run ended and what a person should know about it: ``stopped_by`` (max_steps, max_epochs or
    max_seconds) and plain-language ``warnings``."""
    if timed_out:
        return {"stopped_by": "max_seconds", "warnings": [
            f"The time budget of {config.max_seconds:.0f} s cut training at step {steps} of {planned}: the model "
            f"trained less than its recipe asks. Give it more time (or a faster machine) for the full result."]}
    if planned < config.max_steps:
        return {"stopped_by": "max_epochs", "warnings": [
            f"Trained {steps} steps, not {config.max_steps}: that is {config.max_epochs} passes over the "
            f"{rows} {what}, and more would only memorise them. Collect more data for a longer training."]}
    return {"stopped_by": "max_steps", "warnings": []}


_PHASE: list[str] = []


@contextlib.contextmanager
def phase(name: str):
    """Progress lines emitted inside carry ``"phase": name`` (a command of several parts, e.g. coldstart)."""
    _PHASE.append(name)
    try:
        yield
    finally:
        _PHASE.pop()


def emit(record: dict) -> None:
    """One progress line on stdout, flushed at once so a parent process sees it live."""
    if _PHASE and not record.get("done"):
        record = {**record, "phase": _PHASE[-1]}
    clean = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in record.items()}
    sys.stdout.write(json.dumps(clean) + "\n")
    sys.stdout.flush()


class Timer:
    """Wall-clock seconds since construction."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
