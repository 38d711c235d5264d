"""Supervised fine-tuning: multi-turn ``messages`` rows, loss on assistant tokens only.

The loop: length-grouped batches (little padding), AdamW with warmup and cosine / linear decay,
grad clipping, one JSON progress line every ``log_every`` steps, then an HF checkpoint.

With ``--val-data`` (held-out rows, e.g. a flywheel cycle's split of its new rows) every progress line also
carries ``val_loss``, and the checkpoint keeps the weights of the line where it was lowest: a few rows trained
too long are memorised, and the validation loss is what shows it. ``--patience`` stops the run there.
"""

from __future__ import annotations

import logging
import random

import torch

from trainer import data as D
from trainer.configs import SFTConfig, config_dict
from trainer.model import (TrainerError, load, resolve_device, resolve_dtype, save_checkpoint, sha256_file,
                           training_prompt_style)
from trainer.optim import (Timer, clip_and_step, emit, log_interval, make_optimizer, planned_steps, set_seed,
                           set_threads, stop_report)
from trainer.vlm import is_vlm, train_sft_vlm

log = logging.getLogger("trainer")

MIN_SHARED_PREFIX = 32  # below this, computing the prefix apart saves less than it costs


def shared_prefix_length(examples: list[D.Example]) -> int:
    """Tokens every example starts with, none of them trained on, leaving each at least one more.

    Snapshot rows all open with the same system prompt; on a CPU that prompt is most of the
    compute, so the loop runs it once a batch and shares its KV cache (exactly the same loss).
    """
    first = examples[0].input_ids
    length = min(len(e) for e in examples) - 1
    for example in examples:
        ids, labels = example.input_ids, example.labels
        n = 0
        while n < length and ids[n] == first[n] and labels[n] == D.IGNORE:
            n += 1
        length = n
    return max(length, 0)


def prefix_shared_loss(model, prefix: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Token-mean loss of ``prefix + batch`` rows, running the shared ``prefix`` [1, P] once.

    batch: collate() of the rows with the prefix cut off (their labels still aligned to their
    tokens). Equal to the loss of the full rows: the last prefix logit predicts each row's first
    token, and every row attends to the same prefix keys and values.
    """
    import inspect

    cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    rows = batch["input_ids"].shape[0]
    out = model(input_ids=prefix, use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    for layer in cache.layers:
        layer.keys = layer.keys.expand(rows, -1, -1, -1)
        layer.values = layer.values.expand(rows, -1, -1, -1)
    mask = torch.cat([torch.ones(rows, prefix.shape[1], dtype=batch["attention_mask"].dtype,
                                 device=prefix.device), batch["attention_mask"]], dim=1)
    logits = model(input_ids=batch["input_ids"], attention_mask=mask, **{cache_arg: cache}).logits
    first = out.logits[:, -1:].expand(rows, 1, -1)
    predictions = torch.cat([first, logits[:, :-1]], dim=1)
    return torch.nn.functional.cross_entropy(predictions.float().reshape(-1, predictions.shape[-1]),
                                             batch["labels"].reshape(-1), ignore_index=D.IGNORE)


def train_sft(config: SFTConfig) -> dict:
    """Train on ``config.data`` from ``config.init`` and save to ``config.out``. Returns the metrics."""
    if is_vlm(config.init):  # a vision-language checkpoint: TRL's trainer (trainer/vlm.py)
        if config.val_data or config.patience:
            raise TrainerError("--val-data and --patience are for the text model's SFT loop; a vision-language "
                               "checkpoint trains through TRL without them")
        return train_sft_vlm(config)
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    set_threads(config.threads)
    rng = set_seed(config.seed)
    conversations = D.read_sft(config.data, init=config.init, action_format=config.action_format)
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    loaded = load(config.init, device=device, dtype=dtype, lora=config.lora, seed=config.seed)
    model, tokenizer = loaded.model, loaded.tokenizer
    style = training_prompt_style(loaded, config.prompt_style)
    conversations, restyled = D.restyle(conversations, style)
    if restyled:
        log.info("sft: %d of %d rows re-rendered in the %s prompt style", restyled, len(conversations), style)
    examples = [D.sft_example(tokenizer, messages, config.max_length) for messages in conversations]
    prefix_len = shared_prefix_length(examples) if config.shared_prefix and not loaded.is_lora else 0
    if prefix_len < MIN_SHARED_PREFIX:
        prefix_len = 0
    prefix = torch.tensor([examples[0].input_ids[:prefix_len]], device=device)
    if prefix_len:
        examples = [D.Example(e.input_ids[prefix_len:], e.labels[prefix_len:]) for e in examples]
        log.info("sft: every row shares its first %d tokens; they run once a batch", prefix_len)
    lengths = [len(e) for e in examples]
    val = _val_examples(config, tokenizer, style)
    log.info("sft: %d rows, %d tokens (%d trained on), device %s %s", len(examples), sum(lengths),
             sum(sum(1 for t in e.labels if t != D.IGNORE) for e in examples), device, dtype)

    planned = planned_steps(config, len(D.length_batches(lengths, config.batch_tokens, random.Random(0))))
    if planned < config.max_steps:
        log.info("sft: %d steps, not %d: %s passes over %d rows", planned, config.max_steps, config.max_epochs,
                 len(examples))
    optimizer, scheduler = make_optimizer(model.parameters(), config, total=planned)
    every = log_interval(config, planned)
    model.train()
    timer = Timer()
    batches: list[list[int]] = []
    epoch, tokens_seen, window_tokens = 0, 0, 0
    window = Timer()
    losses: list[float] = []
    first_loss = None
    timed_out = early = False
    best = _Best()
    for step in range(planned):
        if config.max_seconds and timer.elapsed() > config.max_seconds:
            log.info("sft: time budget of %.0f s spent after %d steps", config.max_seconds, step)
            timed_out = True
            break
        if not batches:
            batches = D.length_batches(lengths, config.batch_tokens, rng)
            epoch += 1
        batch = D.collate([examples[i] for i in batches.pop()], tokenizer.pad_token_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        loss = prefix_shared_loss(model, prefix, batch) if prefix_len else model(**batch).loss
        loss.backward()
        grad_norm = clip_and_step(model, optimizer, scheduler, config.grad_clip)
        value = float(loss.detach())
        first_loss = value if first_loss is None else first_loss
        losses.append(value)
        n_tokens = int(batch["attention_mask"].sum()) + prefix_len * batch["input_ids"].shape[0]
        tokens_seen += n_tokens
        window_tokens += n_tokens
        if (step + 1) % every == 0 or step + 1 == planned:
            line = {"step": step + 1, "total": planned, "loss": sum(losses[-every:]) / len(losses[-every:]),
                    "lr": scheduler.get_last_lr()[0], "grad_norm": grad_norm, "epoch": epoch,
                    "tokens_per_s": window_tokens / max(window.elapsed(), 1e-9)}
            if val:
                line["val_loss"] = batch_loss(model, val, tokenizer.pad_token_id, device)
                model.train()
                best.offer(model, line["val_loss"], step + 1)
            emit(line)
            window, window_tokens = Timer(), 0
            if val and config.patience and best.waited >= config.patience:
                log.info("sft: val_loss has not improved for %d progress lines: stopping at step %d, keeping the "
                         "weights of step %d", best.waited, step + 1, best.step)
                early = True
                break
    if not losses:
        raise TrainerError("no optimizer step ran (max_steps 0?)")
    val_report = best.restore(model) if val else {}
    tail = losses[-min(len(losses), 10):]
    metrics = {
        "algorithm": "sft",
        "steps": len(losses),
        "epochs": epoch,
        "first_loss": first_loss,
        "final_loss": sum(tail) / len(tail),
        "train_seconds": timer.elapsed(),
        "tokens": tokens_seen,
        "tokens_per_s": tokens_seen / max(timer.elapsed(), 1e-9),
        "rows": len(examples),
        "prompt_style": style,
        "planned_steps": planned,
        **stop_report(config, steps=len(losses), planned=planned, rows=len(examples), what="rows",
                      timed_out=timed_out),
        **val_report,
    }
    if early:
        metrics["stopped_by"] = "early_stop"
        metrics["warnings"] = [*metrics["warnings"], (
            f"Stopped at step {len(losses)} of {planned}: the loss on {len(val)} held-out rows had not improved for "
            f"{config.patience} progress lines; the checkpoint has the weights of step {best.step}.")]
    save_checkpoint(loaded, config.out, algorithm="sft", config=config_dict(config),
                    data_sha256=sha256_file(config.data), metrics=metrics)
    return metrics


def _val_examples(config: SFTConfig, tokenizer, style: str) -> list[D.Example]:
    """The held-out rows of ``--val-data``, tokenized like the training rows (empty without it)."""
    if not config.val_data:
        if config.patience:
            raise TrainerError("--patience stops on the validation loss: give --val-data too")
        return []
    conversations = D.read_sft(config.val_data, init=config.init, action_format=config.action_format)
    if not conversations:
        raise TrainerError(f"--val-data {config.val_data} holds no rows")
    conversations, _ = D.restyle(conversations, style)
    return [D.sft_example(tokenizer, messages, config.max_length) for messages in conversations]


@torch.no_grad()
def batch_loss(model, examples: list[D.Example], pad_token_id: int, device, batch_rows: int = 16) -> float:
    """Mean loss per trained-on token of ``examples`` (the model is left in eval mode)."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(examples), batch_rows):
        batch = D.collate(examples[i:i + batch_rows], pad_token_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        n = int((batch["labels"][:, 1:] != D.IGNORE).sum())
        total += float(model(**batch).loss) * n
        count += n
    return total / max(count, 1)


class _Best:
    """The trainable weights at the lowest validation loss so far (a copy on the CPU: all of a small model's, or
    a LoRA's adapter only), and how many progress lines have passed without a lower one."""

    def __init__(self) -> None:
        self.loss, self.step, self.first, self.waited, self.state = float("inf"), 0, None, 0, None

    def offer(self, model, loss: float, step: int) -> None:
        self.first = loss if self.first is None else self.first
        if loss < self.loss - 1e-6:
            self.loss, self.step, self.waited = loss, step, 0
            self.state = {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}
        else:
            self.waited += 1

    def restore(self, model) -> dict:
        """Put the best weights back; the figures the run reports about its validation."""
        if self.state is not None:
            params = dict(model.named_parameters())
            with torch.no_grad():
                for name, value in self.state.items():
                    params[name].copy_(value.to(params[name].device))
        return {"val_loss_first": self.first, "val_loss_best": self.loss if self.state is not None else None,
                "best_step": self.step}


@torch.no_grad()
def eval_loss(model, tokenizer, conversations: list[list[dict]], max_length: int = 2048) -> float:
    """Mean assistant-token loss of ``model`` on ``conversations`` (token-weighted)."""
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for messages in conversations:
        batch = D.collate([D.sft_example(tokenizer, messages, max_length)], tokenizer.pad_token_id)
        batch = {k: v.to(device) for k, v in batch.items()}
        logp, mask = D.token_logprobs(model, batch)
        total += float(-logp.sum())
        count += int(mask.sum())
    return total / max(count, 1)


__all__ = ["train_sft", "eval_loss"]
