"""What Loupe hooks into a TRL trainer's loop (SFT, DPO, GRPO alike): the JSON progress lines and the time budget
(:class:`Progress`), the best weights on a validation split (:class:`BestWeights`), and the snapshot rows each
optimizer step trained on (:class:`RowTrace`)."""

from __future__ import annotations

import logging
import math

import torch
from transformers import TrainerCallback

from trainer import distributed
from trainer.optim import Timer, emit

__all__ = ["BestWeights", "Progress", "RowTrace"]

log = logging.getLogger("trainer")


class Progress(TrainerCallback):
    """Progress lines on stdout (trainer.optim.emit) every ``every`` steps, the per-step history, and the time
    budget (``max_seconds`` stops training after the step that spends it).

    With a validation split (``validating``) the Trainer evaluates after each progress line's step (and the last
    one); the line waits for that evaluation and carries its ``val_loss``.

    With several processes only rank 0 prints (every rank keeps the history: the logged values are already
    averaged over ranks), and the budget is spent by rank 0's clock, sent to every rank after each step: each rank
    must stop at the same step and decay its learning rate alike."""

    def __init__(self, config, planned: int, every: int, keys: dict[str, str], validating: bool = False):
        self.config, self.planned, self.every, self.keys = config, planned, every, keys
        self.validating = validating
        self.history: list[dict] = []
        self.timer = self.window = Timer()
        self.tokens = self.window_tokens = 0
        self.timed_out = False
        self.shared_elapsed = 0.0
        self.pending: dict | None = None  # a line waiting for its validation loss

    def elapsed(self) -> float:
        """Seconds of training by the clock every rank agrees on (rank 0's, as of the last step's end)."""
        return self.timer.elapsed() if distributed.world_size() == 1 else self.shared_elapsed

    def on_train_begin(self, args, state, control, **kwargs):
        self.timer = self.window = Timer()
        self.shared_elapsed = 0.0

    def on_step_end(self, args, state, control, **kwargs):
        budget = self.config.max_seconds
        if budget:
            self.shared_elapsed = distributed.broadcast(self.timer.elapsed())
            if self.elapsed() > budget and state.global_step < self.planned:
                log.info("trl: time budget of %.0f s spent after %d steps", budget, state.global_step)
                self.timed_out = control.should_training_stop = True
        step = state.global_step
        if self.validating and (step % self.every == 0 or step >= self.planned or control.should_training_stop):
            control.should_log = control.should_evaluate = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "eval_loss" in logs and self.pending is not None:
            self.pending["val_loss"] = float(logs["eval_loss"])
            self._emit(self.pending, state)
            self.pending = None
            return
        if not logs or "loss" not in logs:
            return  # the end-of-training summary
        record = {name: float(logs[key]) for name, key in self.keys.items() if key in logs}
        self.tokens = int(logs.get("num_tokens", self.tokens))
        self.history.append(record)
        step = state.global_step
        last = step >= self.planned or control.should_training_stop
        if step % self.every and not last:
            return
        recent = self.history[-self.every:]
        line = {"step": step, "total": self.planned,
                **{k: sum(h.get(k, 0.0) for h in recent) / len(recent) for k in record if k not in ("lr", "grad_norm")},
                "lr": record.get("lr"), "epoch": math.ceil(state.epoch or 0)}
        if "grad_norm" in record:
            line["grad_norm"] = record["grad_norm"]
        if "num_tokens" in logs:
            line["tokens_per_s"] = (self.tokens - self.window_tokens) / max(self.window.elapsed(), 1e-9)
            self.window, self.window_tokens = Timer(), self.tokens
        if self.validating:
            self.pending = line
        else:
            self._emit(line, state)

    @staticmethod
    def _emit(line: dict, state) -> None:
        if state.is_world_process_zero:
            emit(line)


class BestWeights(TrainerCallback):
    """With a validation split: the trainable weights at the lowest validation loss so far (a copy on the CPU: all
    of a small model's, or a LoRA's adapter only), put back when training ends; ``patience`` evaluations without a
    lower loss stop training. A few rows trained too long are memorised, and the validation loss shows it."""

    def __init__(self, model, patience: int) -> None:
        self.model, self.patience = model, patience
        self.loss, self.step, self.first, self.waited, self.state = float("inf"), 0, None, 0, None
        self.early = False

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        loss = float((metrics or {}).get("eval_loss", float("nan")))
        self.first = loss if self.first is None else self.first
        if loss < self.loss - 1e-6:
            self.loss, self.step, self.waited = loss, state.global_step, 0
            self.state = {n: p.detach().to("cpu", copy=True) for n, p in self.model.named_parameters()
                          if p.requires_grad}
        else:
            self.waited += 1
            if self.patience and self.waited >= self.patience and not control.should_training_stop:
                log.info("trl: the validation loss has not improved for %d evaluations: stopping at step %d, keeping "
                         "the weights of step %d", self.waited, state.global_step, self.step)
                self.early = control.should_training_stop = True

    def on_train_end(self, args, state, control, **kwargs):
        if self.state is not None:
            params = dict(self.model.named_parameters())
            with torch.no_grad():
                for name, value in self.state.items():
                    params[name].copy_(value.to(params[name].device))

    def report(self) -> dict:
        """The figures a run reports about its validation."""
        return {"val_loss_first": self.first, "val_loss_best": self.loss if self.state is not None else None,
                "best_step": self.step}


class RowTrace(TrainerCallback):
    """Wraps a trainer's collator: takes the ``row`` numbers out of each batch before the real collator sees them
    and, with ``$LOUPE_TRAINER_TRACE`` set, writes the rows of each optimizer step of this rank to its trace.

    Batches are collated ahead of the step that trains them (accelerate's loader reads one ahead), so they queue
    here and each step end takes the oldest ``gradient_accumulation_steps`` of them. Only batches collated while
    training count (DPO's evaluation after training uses the same collator)."""

    def __init__(self, collator, trace: distributed.Trace):
        self.collator, self.trace = collator, trace
        self.batches: list[list[int]] = []
        self.training = False

    def __call__(self, examples: list[dict]):
        if self.training and self.trace:
            self.batches.append([example.get("row") for example in examples])
        return self.collator([{k: v for k, v in example.items() if k != "row"} for example in examples])

    def on_train_begin(self, args, state, control, **kwargs):
        self.training, self.batches = True, []

    def on_step_end(self, args, state, control, **kwargs):
        if self.trace:
            taken, self.batches = self.batches[:args.gradient_accumulation_steps], \
                self.batches[args.gradient_accumulation_steps:]
            self.trace.write({"step": state.global_step, "rows": [row for batch in taken for row in batch]})

    def on_train_end(self, args, state, control, **kwargs):
        self.training = False
