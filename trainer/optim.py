"""What every training loop shares: seeding, AdamW with a warmup + decay schedule, progress lines.

Progress goes to stdout as one JSON object a line (the Django train worker parses it); human
logs go to stderr through ``logging``.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time

import torch

from trainer.configs import CommonConfig


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


class Schedule:
    """Sets the optimizer's learning rate before each step (warmup, decay, optional time budget)."""

    def __init__(self, optimizer, config: CommonConfig, peak: float) -> None:
        self.optimizer, self.config, self.peak = optimizer, config, peak
        self.started = time.perf_counter()
        self.step_index = 0
        self.apply()

    def apply(self) -> None:
        budget = self.config.max_seconds
        time_progress = (time.perf_counter() - self.started) / budget if budget else 0.0
        factor = lr_factor(self.step_index, warmup=self.config.warmup_steps, total=self.config.max_steps,
                           schedule=self.config.schedule, time_progress=time_progress)
        for group in self.optimizer.param_groups:
            group["lr"] = self.peak * factor

    def step(self) -> None:
        self.step_index += 1
        self.apply()

    def get_last_lr(self) -> list[float]:
        return [group["lr"] for group in self.optimizer.param_groups]


def make_optimizer(params, config: CommonConfig, lr: float | None = None):
    """AdamW over trainable ``params`` and its :class:`Schedule`."""
    trainable = [p for p in params if p.requires_grad]
    peak = lr or config.lr
    optimizer = torch.optim.AdamW(trainable, lr=peak, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    return optimizer, Schedule(optimizer, config, peak)


def clip_and_step(model, optimizer, scheduler, grad_clip: float, *, advance: bool = True) -> float:
    """Clip the global grad norm, step, zero grads, move the schedule on (unless ``advance`` is
    False: RL moves it once an iteration). Returns the norm before clipping."""
    params = [p for p in model.parameters() if p.grad is not None]
    norm = torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else float("inf"))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if advance:
        scheduler.step()
    return float(norm)


def emit(record: dict) -> None:
    """One progress line on stdout, flushed at once so a parent process sees it live."""
    clean = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in record.items()}
    sys.stdout.write(json.dumps(clean) + "\n")
    sys.stdout.flush()


class Timer:
    """Wall-clock seconds since construction."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
