"""SFT and DPO of vision-language checkpoints through TRL (trainer/vlm.py reads the rows and calls these).

TRL's SFTTrainer trains on the assistant turns only (``assistant_only_loss``: the Qwen2.5-VL chat template is
swapped for TRL's copy with ``{% generation %}`` marks); DPOTrainer scores the chosen and rejected completions
against the frozen init (with LoRA: the adapter disabled). The repo's contract stays: AdamW with betas (0.9, 0.95)
and the warmup + decay schedule of optim.py, a JSON progress line every ``log_every`` steps from a TrainerCallback,
``max_steps`` / ``max_epochs`` / ``max_seconds`` and the same ``stopped_by`` and ``warnings``, and save_checkpoint's
dir (loupe.json, metrics.json; with LoRA the merged weights at the top and the adapter in ``adapter/``).

Rows are batched ``batch_tokens // max_length`` at a time. ``max_length`` truncates nothing here: cutting a row
would cut its image tokens or its answer.
"""

from __future__ import annotations

import copy
import logging
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset, Features, Image, List, Value
from peft import get_peft_model
from transformers import AutoModelForImageTextToText, TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import DPOConfig as TRLDPOConfig
from trl import DPOTrainer, SFTTrainer
from trl import SFTConfig as TRLSFTConfig

from trainer.configs import config_dict
from trainer.model import (Loaded, TrainerError, parse_lora, read_loupe, resolve_device, resolve_dtype,
                           save_checkpoint, sha256_file)
from trainer.optim import Timer, emit, log_interval, lr_factor, planned_steps, set_seed, set_threads, stop_report
from trainer.tiny_vlm import forget_processor_class, load_processor

log = logging.getLogger("trainer")

# LoRA's default targets: the language model's linear layers. vLLM serves such an adapter at runtime against the
# base; the vision tower keeps its weights (name it in --lora targets=... to adapt it too).
LANGUAGE_LINEAR = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
PARTS = {"role": Value("string"), "content": List({"type": Value("string"), "text": Value("string")})}
IMAGES = List(Image())


def load_vlm(config, device: torch.device, dtype: torch.dtype, style: str) -> Loaded:
    """The init checkpoint's model and processor (``Loaded.tokenizer`` holds the processor), wrapped in LoRA when
    ``config.lora`` asks for it."""
    path = Path(config.init)
    model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True, dtype=dtype).to(device)
    processor = load_processor(path)
    if config.lora:
        lora = parse_lora(config.lora)
        if lora.target_modules == "all-linear":  # no targets= given
            lora.target_modules = LANGUAGE_LINEAR
        model = get_peft_model(model, lora)
    parent = str(path.resolve())
    return Loaded(model=model, tokenizer=processor, parent=parent, base_model=read_loupe(path).get("base_model")
                  or parent, is_lora=bool(config.lora), prompt_style=style)


def dataset(rows: list[dict], columns: tuple[str, ...]) -> Dataset:
    """Rows as a datasets.Dataset whose images decode to PIL images when read (paths are opened lazily)."""
    return Dataset.from_list(rows, features=Features({**{c: List(PARTS) for c in columns}, "images": IMAGES}))


class Progress(TrainerCallback):
    """Progress lines on stdout (trainer.optim.emit) every ``every`` steps, the per-step history, and the time
    budget (``max_seconds`` stops training after the step that spends it)."""

    def __init__(self, config, planned: int, every: int, keys: dict[str, str]):
        self.config, self.planned, self.every, self.keys = config, planned, every, keys
        self.history: list[dict] = []
        self.timer = self.window = Timer()
        self.tokens = self.window_tokens = 0
        self.timed_out = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.timer = self.window = Timer()

    def on_step_end(self, args, state, control, **kwargs):
        budget = self.config.max_seconds
        if budget and self.timer.elapsed() > budget and state.global_step < self.planned:
            log.info("vlm: time budget of %.0f s spent after %d steps", budget, state.global_step)
            self.timed_out = control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return  # evaluation and the end-of-training summary
        record = {name: float(logs[key]) for name, key in self.keys.items() if key in logs}
        self.tokens = int(logs.get("num_tokens", self.tokens))
        self.history.append(record)
        step = state.global_step
        if step % self.every and step != self.planned:
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
        emit(line)


def optimizers(model, config, progress: Progress):
    """AdamW over the trainable parameters and optim.py's schedule (warmup, decay to 10 %, the time budget read off
    ``progress``'s clock) as a LambdaLR."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))

    def factor(step: int) -> float:
        budget = config.max_seconds
        return lr_factor(step, warmup=config.warmup_steps, total=progress.planned, schedule=config.schedule,
                         time_progress=progress.timer.elapsed() / budget if budget else 0.0)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def trainer_args(config, device: torch.device, dtype: torch.dtype, planned: int, batch: int, output_dir: str) -> dict:
    """The TrainingArguments both TRL configs share."""
    return dict(output_dir=output_dir, max_steps=planned, per_device_train_batch_size=batch,
                per_device_eval_batch_size=batch, gradient_accumulation_steps=1, learning_rate=config.lr,
                max_grad_norm=config.grad_clip, seed=config.seed, data_seed=config.seed, logging_steps=1,
                save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=device.type == "cpu",
                bf16=dtype == torch.bfloat16, activation_checkpointing=device.type == "cuda", max_length=None,
                dataloader_num_workers=0)


def own_stdout(trainer) -> None:
    """Take out the Trainer's own log printing: stdout carries only the progress lines."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


@dataclass
class Run:
    """A prepared TRL run: the trainer, what it trains and how progress is kept."""

    trainer: Any
    loaded: Loaded
    progress: Progress
    planned: int
    rows: int
    workdir: tempfile.TemporaryDirectory


def _setup(config, rows: list[dict], style: str):
    if not rows:
        raise TrainerError(f"{config.data}: no rows to train on")
    set_threads(config.threads)
    set_seed(config.seed)
    device = resolve_device(config.device)
    dtype = resolve_dtype(config.dtype, device)
    batch = max(1, config.batch_tokens // max(config.max_length, 1))
    planned = planned_steps(config, math.ceil(len(rows) / batch))
    if planned < config.max_steps:
        log.info("vlm: %d steps, not %d: %s passes over %d rows", planned, config.max_steps, config.max_epochs,
                 len(rows))
    loaded = load_vlm(config, device, dtype, style)
    return device, dtype, batch, planned, loaded


def prepare_sft(config, rows: list[dict], style: str) -> Run:
    """An SFTTrainer on ``rows`` (vlm.read_sft_rows), loss on the assistant turns only."""
    device, dtype, batch, planned, loaded = _setup(config, rows, style)
    workdir = tempfile.TemporaryDirectory(prefix="loupe-trl-")
    args = TRLSFTConfig(**trainer_args(config, device, dtype, planned, batch, workdir.name), assistant_only_loss=True,
                        packing=False, padding_free=False)
    progress = Progress(config, planned, log_interval(config, planned),
                        {"loss": "loss", "lr": "learning_rate", "grad_norm": "grad_norm"})
    trainer = SFTTrainer(model=loaded.model, args=args, train_dataset=dataset(rows, ("messages",)),
                         processing_class=loaded.tokenizer, callbacks=[progress],
                         optimizers=optimizers(loaded.model, config, progress))
    own_stdout(trainer)
    log.info("sft: %d rows with %d images, %d a batch, device %s %s%s", len(rows),
             sum(len(r["images"]) for r in rows), batch, device, dtype, ", LoRA" if loaded.is_lora else "")
    return Run(trainer, loaded, progress, planned, len(rows), workdir)


def prepare_dpo(config, rows: list[dict], style: str) -> Run:
    """A DPOTrainer on ``rows`` (vlm.read_dpo_rows) against the frozen init."""
    device, dtype, batch, planned, loaded = _setup(config, rows, style)
    workdir = tempfile.TemporaryDirectory(prefix="loupe-trl-")
    losses = (["sigmoid", "sft"], [1.0, config.sft_weight]) if config.sft_weight > 0 else (["sigmoid"], None)
    args = TRLDPOConfig(**trainer_args(config, device, dtype, planned, batch, workdir.name), beta=config.beta,
                        loss_type=losses[0], loss_weights=losses[1], precompute_ref_log_probs=False)
    reference = None if loaded.is_lora else copy.deepcopy(loaded.model).eval().requires_grad_(False)
    progress = Progress(config, planned, log_interval(config, planned),
                        {"loss": "loss", "margin": "rewards/margins", "accuracy": "rewards/accuracies",
                         "lr": "learning_rate"})
    pairs = dataset(rows, ("prompt", "chosen", "rejected"))
    trainer = DPOTrainer(model=loaded.model, ref_model=reference, args=args, train_dataset=pairs, eval_dataset=pairs,
                         processing_class=loaded.tokenizer, callbacks=[progress],
                         optimizers=optimizers(loaded.model, config, progress))
    own_stdout(trainer)
    log.info("dpo: %d pairs with %d images, %d a batch, device %s %s%s", len(rows),
             sum(len(r["images"]) for r in rows), batch, device, dtype, ", LoRA" if loaded.is_lora else "")
    return Run(trainer, loaded, progress, planned, len(rows), workdir)


def _save(run: Run, config, algorithm: str, metrics: dict) -> None:
    model = run.loaded.model
    if run.loaded.is_lora and "ref" in model.peft_config:
        model.delete_adapter("ref")  # DPOTrainer's frozen copy of the fresh adapter, its reference: not the result
    save_checkpoint(run.loaded, config.out, algorithm=algorithm, config=config_dict(config),
                    data_sha256=sha256_file(config.data), metrics=metrics)
    forget_processor_class(config.out)
    run.workdir.cleanup()


def _train(run: Run) -> list[dict]:
    run.trainer.train()
    if not run.progress.history:
        raise TrainerError("no optimizer step ran (max_steps 0?)")
    return run.progress.history


def _stop(run: Run, config, what: str) -> dict:
    return stop_report(config, steps=len(run.progress.history), planned=run.planned, rows=run.rows, what=what,
                       timed_out=run.progress.timed_out)


def train_sft(config, rows: list[dict], style: str) -> dict:
    """Train on ``rows``, save to ``config.out``; returns the metrics (the text loop's keys)."""
    run = prepare_sft(config, rows, style)
    history = _train(run)
    seconds = run.progress.timer.elapsed()
    tail = history[-min(len(history), 10):]
    metrics = {"algorithm": "sft", "model": "vlm", "steps": len(history),
               "epochs": math.ceil(run.trainer.state.epoch or 0), "first_loss": history[0]["loss"],
               "final_loss": sum(h["loss"] for h in tail) / len(tail), "train_seconds": seconds,
               "tokens": run.progress.tokens, "tokens_per_s": run.progress.tokens / max(seconds, 1e-9),
               "rows": run.rows, "prompt_style": style, "planned_steps": run.planned, **_stop(run, config, "rows")}
    _save(run, config, "sft", metrics)
    return metrics


def train_dpo(config, rows: list[dict], style: str) -> dict:
    """Train on the pairs in ``rows``, save to ``config.out``; returns the metrics. The log-probability margins
    (chosen minus rejected) are measured over every pair before and after, as dpo.py does."""
    run = prepare_dpo(config, rows, style)
    before = run.trainer.evaluate()
    history = _train(run)
    seconds = run.progress.timer.elapsed()
    after = run.trainer.evaluate()
    metrics = {"algorithm": "dpo", "model": "vlm", "steps": len(history), "pairs": run.rows,
               "first_loss": history[0]["loss"], "final_loss": history[-1]["loss"],
               "logp_margin_before": before["eval_logps/chosen"] - before["eval_logps/rejected"],
               "logp_margin_after": after["eval_logps/chosen"] - after["eval_logps/rejected"],
               "reward_margin": after["eval_rewards/margins"], "pairs_improved": after["eval_rewards/accuracies"],
               "train_seconds": seconds, "prompt_style": style, "planned_steps": run.planned,
               **_stop(run, config, "pairs")}
    _save(run, config, "dpo", metrics)
    return metrics
