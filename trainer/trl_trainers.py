"""SFT and DPO of every Hugging Face model through TRL: text models (SmolLM2, the tiny random Llama of the tests)
and vision-language ones (Qwen2.5-VL, UI-TARS). sft.py and dpo.py read the rows and call these; GRPO (grpo.py)
reuses the trainer plumbing.

Text SFT rows are tokenized by data.sft_example (labels on the assistant turns, found by rendering the conversation
with and without each turn, which works for any chat template) and handed to TRL's SFTTrainer as ``input_ids`` /
``labels``; a vision-language row goes as messages with images, trained on its assistant turns by TRL's
``assistant_only_loss`` (the Qwen2.5-VL chat template is swapped for TRL's copy with ``{% generation %}`` marks).
DPOTrainer scores the chosen and rejected completions against the frozen init (with LoRA: the adapter disabled).
The repo's contract stays: AdamW with betas (0.9, 0.95) and the warmup + decay schedule of optim.py, a JSON progress
line every ``log_every`` steps from a TrainerCallback, ``max_steps`` / ``max_epochs`` / ``max_seconds`` and the same
``stopped_by`` and ``warnings``, a validation split (``val_data``: its loss on every progress line, the best
weights kept, ``patience`` stops), and save_checkpoint's dir (loupe.json, metrics.json; with LoRA the merged weights
at the top and the adapter in ``adapter/``).

A batch of text rows is ``batch_tokens`` over the rows' mean length, rows of like lengths together in a shuffled
order of batches (:class:`LengthBatches`: little padding, which costs real time on a CPU); a vision-language batch is
``batch_tokens // max_length`` rows, and ``max_length`` cuts nothing there (it would cut image tokens or the
answer). Text rows longer than ``max_length`` lose the start of their prompt.

Under ``torchrun`` / ``accelerate launch`` (trainer/distributed.py, configs in trainer/launch/) the same code runs
in every process: accelerate deals each rank its own batches of one seeded order and averages the gradients
(a step of N processes is the step of one process with N times the batch); rank 0 prints and saves. The trainers
make their optimizer and schedule themselves (:class:`LoupeSchedule`) because FSDP and DeepSpeed wrap the model
first and refuse an optimizer made outside; a sharded model (FSDP, ZeRO-3) is gathered to rank 0 to be saved.

The callbacks (progress lines, best weights, the row trace) are in callbacks.py; the launch-side rules that need no
TRL are in distributed.py. GRPO (grpo.py) reuses the rest.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset, Features, Image, List, Value
from peft import get_peft_model
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, Trainer
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import DPOConfig as TRLDPOConfig
from trl import DPOTrainer, SFTTrainer
from trl import SFTConfig as TRLSFTConfig

from trainer import distributed
from trainer.callbacks import BestWeights, Progress, RowTrace
from trainer.configs import config_dict
from trainer.model import (
    TINY,
    Loaded,
    TrainerError,
    build_tiny,
    cpu_autocast,
    load_tokenizer,
    parse_lora,
    read_loupe,
    resolve_device,
    resolve_dtype,
    save_checkpoint,
    sha256_file,
    text_config,
)
from trainer.optim import log_interval, lr_factor, planned_steps, set_seed, set_threads, stop_report
from trainer.tiny_vlm import forget_processor_class, load_processor
from trainer.vlm import check_chat_template

log = logging.getLogger("trainer")

# TRL reports every trainer it builds to the Hugging Face Hub (its class, the model's architecture, LoRA or not, the
# world size) from a thread of its own, unless the Hub's telemetry is off. A Loupe run trains people's data on their
# machines and is offline by design: off unless HF_HUB_DISABLE_TELEMETRY says otherwise. Set on the module the Hub
# reads at each send, not in os.environ, so the warm trainer's environment stays that of the processes it serves.
if os.environ.get("HF_HUB_DISABLE_TELEMETRY") is None:
    import huggingface_hub.constants

    huggingface_hub.constants.HF_HUB_DISABLE_TELEMETRY = True

# LoRA's default targets on a vision-language model: the language model's linear layers. vLLM serves such an adapter
# at runtime against the base; the vision tower keeps its weights (name it in --lora targets=... to adapt it too). A
# text model's default is PEFT's "all-linear": every linear layer but the output head.
LANGUAGE_LINEAR = r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"
PARTS = {"role": Value("string"), "content": List({"type": Value("string"), "text": Value("string")})}
TEXT_MESSAGE = {"role": Value("string"), "content": Value("string")}
IMAGES = List(Image())


def load_model(config, device: torch.device, dtype: torch.dtype, style: str, vision: bool) -> Loaded:
    """The init checkpoint's model and tokenizer (a vision-language model's processor, in ``Loaded.tokenizer``),
    wrapped in LoRA when ``config.lora`` asks for it."""
    if vision:
        path = Path(config.init)
        model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True, dtype=dtype)
        tokenizer = load_processor(path)
        parent = str(path.resolve())
        base = read_loupe(path).get("base_model") or parent
    elif config.init == TINY:
        model, tokenizer = build_tiny(config.seed)
        model = model.to(dtype)
        parent, base = None, TINY
    else:
        path = Path(config.init)
        tokenizer = load_tokenizer(config.init)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        parent = str(path.resolve())
        base = read_loupe(path).get("base_model") or parent
    if not distributed.uses_deepspeed():  # ZeRO-3 loaded it partitioned (the TRL config made first) and places it
        model = model.to(device)
    if config.lora:
        lora = parse_lora(config.lora)
        if vision and lora.target_modules == "all-linear":  # no targets= given
            lora.target_modules = LANGUAGE_LINEAR
        try:
            model = get_peft_model(model, lora)
        except ValueError as exc:  # PEFT's: targets that name no module of this model (another base's names)
            targets = lora.target_modules if isinstance(lora.target_modules, str) else ", ".join(sorted(lora.target_modules))
            raise TrainerError(f"--lora targets {targets}: no module of the init {config.init} matches them "
                               f"({str(exc).splitlines()[0][:160]})") from None
    return Loaded(model=model, tokenizer=tokenizer, parent=parent, base_model=base, is_lora=bool(config.lora),
                  prompt_style=style)


def dataset(rows: list[dict], columns: tuple[str, ...], vision: bool = True) -> Dataset:
    """Conversational rows as a datasets.Dataset: with images, contents as parts and images that decode to PIL
    images when read (paths are opened lazily); without, plain string contents. With their snapshot line numbers
    (``row``) where the readers gave them."""
    numbered = {"row": Value("int64")} if rows and "row" in rows[0] else {}
    if not vision:
        return Dataset.from_list(rows, features=Features({**{c: List(TEXT_MESSAGE) for c in columns}, **numbered}))
    return Dataset.from_list(rows, features=Features({**{c: List(PARTS) for c in columns}, "images": IMAGES,
                                                      **numbered}))


def tokenized(rows: list[dict]) -> Dataset:
    """Text SFT rows already tokenized (``input_ids``, ``labels`` with -100 off the answers, ``row``)."""
    return Dataset.from_list(rows, features=Features({"input_ids": List(Value("int32")),
                                                      "labels": List(Value("int32")), "row": Value("int64")}))


def schedule(config, progress: Progress):
    """optim.py's learning-rate factor of a step (warmup, decay to 10 %, the time budget read off ``progress``'s
    shared clock), for a LambdaLR."""

    def factor(step: int) -> float:
        budget = config.max_seconds
        return lr_factor(step, warmup=config.warmup_steps, total=progress.planned, schedule=config.schedule,
                         time_progress=progress.elapsed() / budget if budget else 0.0)

    return factor


def optimizers(model, config, progress: Progress):
    """AdamW over the trainable parameters and :func:`schedule` as a LambdaLR, for a trainer that takes its
    optimizers made outside (one process or DDP; FSDP and DeepSpeed refuse them: use :class:`LoupeSchedule`)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule(config, progress))


class LoupeSchedule:
    """Mixed into a TRL trainer: AdamW comes from the TrainingArguments (:func:`trainer_args`: betas 0.9 / 0.95, no
    weight decay on biases and norms), the learning rate follows :func:`schedule`, both made after the model is
    wrapped (DDP, FSDP, DeepSpeed), and the snapshot's line numbers (``row``) reach the collator
    (:class:`RowTrace`) instead of being dropped as a column the model does not take."""

    def __init__(self, *args, lr_factor, **kwargs):
        self.loupe_lr_factor = lr_factor
        super().__init__(*args, **kwargs)

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.lr_scheduler is None:
            self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer or self.optimizer, self.loupe_lr_factor)
            self._created_lr_scheduler = True
        return self.lr_scheduler

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "row" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "row"]


class LengthBatches(torch.utils.data.Sampler):
    """Row indices in batches of ``batch`` rows of like length, the batches in a shuffled order, another each pass
    (data.length_batches' order for the Trainer's DataLoader, which cuts them ``batch`` at a time; under several
    processes accelerate deals the batches round-robin). The Trainer's own ``group_by_length`` orders each
    megabatch longest first: a run of a few dozen steps saw the short rows (one task's) only at its end, or never
    (trainer/README.md, "Measured around TRL")."""

    def __init__(self, lengths: list[int], batch: int, seed: int) -> None:
        self.lengths, self.batch, self.seed, self.passes = lengths, batch, seed, 0

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        import random

        rng = random.Random(self.seed * 1_000_003 + self.passes)
        self.passes += 1
        order = sorted(range(len(self.lengths)), key=lambda i: (self.lengths[i], rng.random()))
        batches = [order[i:i + self.batch] for i in range(0, len(order), self.batch)]
        rng.shuffle(batches)
        return iter([index for batch in batches for index in batch])


def keeps_logits(model) -> bool:
    """Whether the causal LM under ``model`` (a PEFT wrapper or not) computes its output layer only at the positions
    ``logits_to_keep`` names (transformers' text models do)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(inner.forward).parameters


def answer_positions(labels: torch.Tensor) -> torch.Tensor:
    """The positions whose next token is learnt (its label is not -100), as a (rows, length) boolean mask: where a
    causal LM's logits are needed for the loss. A prompt is most of a row (a cycle's rows: about 1,000 tokens of
    screens and history before an answer of 40), and SmolLM2's output layer (49,152 words) at every position was
    about a third of a LoRA step's arithmetic and most of its memory."""
    keep = torch.zeros_like(labels, dtype=torch.bool)
    keep[:, :-1] = labels[:, 1:] != -100
    return keep


def answer_loss(outputs, labels: torch.Tensor, num_items_in_batch=None) -> torch.Tensor:
    """The causal-LM loss of transformers' ForCausalLMLoss (float32 cross-entropy, summed over the learnt tokens and
    divided by their count in the whole batch) from logits computed only at :func:`answer_positions`: ``outputs``'
    logits are (positions kept, vocabulary), in the mask's order."""
    following = labels[:, 1:]
    targets = following[following != -100]  # in the mask's order: each kept position's next token
    logits = outputs["logits"].float().reshape(-1, outputs["logits"].shape[-1])
    loss = torch.nn.functional.cross_entropy(logits, targets.to(logits.device), reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else targets.numel()
    return loss / torch.as_tensor(count, device=loss.device).clamp(min=1)  # a batch without an answer: 0, not NaN


class LoupeSFTTrainer(LoupeSchedule, SFTTrainer):
    """TRL's SFTTrainer with Loupe's optimizer, schedule and row numbers, and its loss a mean over the answer
    tokens of every process's rows: a step of N processes is the step of one process with all their rows.

    Qwen2.5-VL says its forward takes no loss arguments (``accepts_loss_kwargs = False``), so the Trainer would not
    count the batch's tokens across ranks, and each rank would average over its own tokens (rows of different
    lengths then weigh differently than in one process; trainer/README.md). So the loss is told the trainer counts
    the tokens (``model_accepts_loss_kwargs``), and :func:`answer_loss` divides by the count it is given."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model_accepts_loss_kwargs = True
        # the output layer only where a token is learnt (answer_loss), if the model can be asked to
        self.loupe_answer_logits = keeps_logits(self.model)
        if self.loupe_answer_logits:
            self.compute_loss_func = answer_loss

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The causal-LM loss over the answer tokens of every process's rows (their ``labels``: sft.py's for text
        rows, TRL's collator's assistant mask for vision-language rows), as the Trainer computes it, instead of TRL's
        fused head, whose tiles run as Python on a CPU and made the steps slower (trainer/README.md, "Measured around
        TRL"). The output layer runs only at the positions whose next token is learnt (:func:`answer_loss`)."""
        mode = "train" if self.model.training else "eval"
        if mode == "train":  # the count TRL keeps for its num_tokens metric (tokens_per_s on the progress lines)
            self._total_train_tokens += self.accelerator.gather_for_metrics(inputs["attention_mask"].sum()).sum().item()
        self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
        if self.loupe_answer_logits:
            inputs = {**inputs, "logits_to_keep": answer_positions(inputs["labels"])}
        return Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)

    def _get_train_sampler(self, train_dataset=None):
        dataset = self.train_dataset if train_dataset is None else train_dataset
        if "input_ids" not in dataset.column_names:  # rows with images: their length is known once they are read
            return super()._get_train_sampler(train_dataset)
        return LengthBatches([len(ids) for ids in dataset["input_ids"]], self.args.train_batch_size, self.args.seed)


class LoupeDPOTrainer(LoupeSchedule, DPOTrainer):
    """TRL's DPOTrainer with Loupe's optimizer, schedule and row numbers."""


# A step's backward pass keeps every layer's activations of its batch: about 4 x (16 x hidden + 9 x intermediate) bytes
# a token a layer (one 2,048-token row of SmolLM2-135M, 30 layers, peaked at 5.5 GB). A cycle's batches are of rows of
# like length (LengthBatches), so its three longest rows, the shop's pages of 2,048 tokens, met in one batch: the SFT
# held 15-17 GB and the kernel killed it on a 24 GB machine (issue 34's flywheel, twice). A run on the CPU whose widest
# batch would keep more than this checkpoints activations (each layer's forward is computed again in the backward
# pass: the same numbers, some 30 % more arithmetic for those runs only); LOUPE_TRAINER_CHECKPOINT_ABOVE_GB sets it.
CHECKPOINT_ABOVE_GB = 4.0


def activation_gb(init: str, tokens: int) -> float | None:
    """The activations a step of ``tokens`` (its rows times its longest row) keeps for its backward pass, in GB, by
    the shape in the init checkpoint's config.json; None without one (a built-in test model)."""
    shape = text_config(init)
    try:
        per_token = shape["num_hidden_layers"] * 4 * (16 * shape["hidden_size"] + 9 * shape["intermediate_size"])
    except (KeyError, TypeError):
        return None
    return tokens * per_token / 2**30


def checkpoints_activations(config, device: torch.device, batch: int, lengths: list[int] | None) -> bool:
    """Whether a text run on the CPU checkpoints activations: its widest batch (``batch`` rows as long as the longest
    of ``lengths``) would keep more than LOUPE_TRAINER_CHECKPOINT_ABOVE_GB (:data:`CHECKPOINT_ABOVE_GB`)."""
    if device.type != "cpu" or not lengths or distributed.uses_fsdp():
        return False
    limit = float(os.environ.get("LOUPE_TRAINER_CHECKPOINT_ABOVE_GB") or CHECKPOINT_ABOVE_GB)
    gb = activation_gb(config.init, batch * max(lengths))
    if gb is None or gb <= limit:
        return False
    log.info("trl: activations checkpointed: a batch of %d rows of up to %d tokens would keep about %.1f GB (over %g)",
             batch, max(lengths), gb, limit)
    return True


def trainer_args(config, device: torch.device, dtype: torch.dtype, planned: int, batch: int, output_dir: str,
                 checkpoint: bool = False) -> dict:
    """The TrainingArguments every TRL config shares (``batch`` rows a step in each process). bf16: bfloat16 autocast
    on CUDA (over a full fine-tune's float32 weights: distributed.weights_dtype), or on a CPU that multiplies bfloat16
    natively (model.cpu_autocast). ``checkpoint``: checkpoint activations on the CPU too (:func:`checkpoints_activations`)."""
    return dict(output_dir=output_dir, max_steps=planned, per_device_train_batch_size=batch,
                per_device_eval_batch_size=batch, gradient_accumulation_steps=1, learning_rate=config.lr,
                optim="adamw_torch", adam_beta1=0.9, adam_beta2=0.95, weight_decay=config.weight_decay,
                max_grad_norm=config.grad_clip, seed=config.seed, data_seed=config.seed, logging_steps=1,
                save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=device.type == "cpu",
                bf16=distributed.bf16_compute(config, device) or cpu_autocast(config.dtype, device, config.init),
                activation_checkpointing=distributed.activation_checkpointing(device) or checkpoint, max_length=None,
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
    trace: RowTrace | None = None
    best: BestWeights | None = None  # with a validation split


def _plan(config, rows: list[dict], lengths: list[int] | None) -> tuple[torch.device, torch.dtype, int, int]:
    """The device, dtype, rows a batch in each process and planned steps of a run on ``rows``: ``batch_tokens`` over
    the mean of the rows' token ``lengths`` (text), or over ``max_length`` (vision-language rows, whose length is
    known only once their images are read)."""
    if not rows:
        raise TrainerError(f"{config.data}: no rows to train on")
    set_threads(config.threads)
    device = distributed.device_of(resolve_device(config.device))
    dtype = distributed.weights_dtype(config, device)  # a full fine-tune on a GPU: float32 under bf16 autocast
    if lengths:
        batch = max(1, round(config.batch_tokens / (sum(lengths) / len(lengths))))
    else:
        batch = max(1, config.batch_tokens // max(config.max_length, 1))
    processes = distributed.world_size()
    planned = planned_steps(config, math.ceil(len(rows) / (batch * processes)))
    if planned < config.max_steps:
        log.info("trl: %d steps, not %d: %s passes over %d rows", planned, config.max_steps, config.max_epochs,
                 len(rows))
    if processes > 1 and len(rows) % (batch * processes):
        log.info("trl: %d rows do not fill the %d x %d rows of a step: accelerate repeats %d of them at the end "
                 "of each pass to keep the ranks in step", len(rows), processes, batch,
                 -len(rows) % (batch * processes))
    return device, dtype, batch, planned


def _run(trainer, progress: Progress, loaded: Loaded, rows: list[dict], planned: int, batch: int,
         workdir: tempfile.TemporaryDirectory, best: BestWeights | None = None) -> Run:
    """The prepared run: the trainer's own printing taken out, its collator wrapped by a :class:`RowTrace`."""
    own_stdout(trainer)
    if distributed.uses_fsdp() and not trainer.is_fsdp_enabled:  # accelerate 1.16 shards only on accelerators
        log.warning("the launch config asks for FSDP, but accelerate does not shard on %s: this run is plain DDP, "
                    "each process holding the whole model", trainer.args.device.type)
    trace = RowTrace(trainer.data_collator, distributed.Trace())
    trainer.data_collator = trace
    trainer.add_callback(trace)
    log.info("%s: %d rows (%d images), %d a batch in each of %d processes, device %s %s%s",
             "dpo" if isinstance(trainer, DPOTrainer) else "sft", len(rows), sum(len(r.get("images", ())) for r in rows),
             batch, distributed.world_size(), trainer.args.device, loaded.model.dtype,
             ", LoRA" if loaded.is_lora else "")
    return Run(trainer, loaded, progress, planned, len(rows), workdir, trace, best)


def prepare_sft(config, rows: list[dict], style: str, vision: bool, val: list[dict] | None = None) -> Run:
    """An SFTTrainer on ``rows``, loss on the assistant turns only: tokenized text rows (``input_ids``, ``labels``,
    sft.py) or vision-language rows (vlm.read_sft_rows). ``val``: held-out rows of the same kind, evaluated at every
    progress line (:class:`BestWeights`)."""
    lengths = None if vision else [len(r["input_ids"]) for r in rows]
    device, dtype, batch, planned = _plan(config, rows, lengths)
    workdir = tempfile.TemporaryDirectory(prefix="loupe-trl-")
    # the TRL config before the model: under ZeRO-3 it makes from_pretrained load the weights partitioned
    checkpoint = checkpoints_activations(config, device, batch, lengths)
    args = TRLSFTConfig(**trainer_args(config, device, dtype, planned, batch, workdir.name, checkpoint),
                        assistant_only_loss=vision, packing=False, padding_free=False, eval_strategy="no")
    set_seed(config.seed)  # after the process group is up: every rank draws the same LoRA init
    loaded = load_model(config, device, dtype, style, vision)
    if vision:  # a template TRL cannot mark for assistant-only loss is refused saying so, not a ValueError
        check_chat_template(loaded.tokenizer, config.init)
    progress = Progress(config, planned, log_interval(config, planned),
                        {"loss": "loss", "lr": "learning_rate", "grad_norm": "grad_norm"}, validating=bool(val))
    best = BestWeights(loaded.model, config.patience) if val else None
    data = dataset(rows, ("messages",)) if vision else tokenized(rows)
    held_out = (dataset(val, ("messages",)) if vision else tokenized(val)) if val else None
    trainer = LoupeSFTTrainer(model=loaded.model, args=args, train_dataset=data, eval_dataset=held_out,
                              processing_class=loaded.tokenizer, callbacks=[progress, *([best] if best else [])],
                              lr_factor=schedule(config, progress))
    return _run(trainer, progress, loaded, rows, planned, batch, workdir, best)


def prepare_dpo(config, rows: list[dict], style: str, vision: bool, lengths: list[int] | None = None) -> Run:
    """A DPOTrainer on ``rows`` (dpo.py's text pairs, or vlm.read_dpo_rows) against the frozen init; ``lengths``: a
    text pair's tokens (its prompt and both completions), which size the batches."""
    device, dtype, batch, planned = _plan(config, rows, lengths)
    workdir = tempfile.TemporaryDirectory(prefix="loupe-trl-")
    losses = (["sigmoid", "sft"], [1.0, config.sft_weight]) if config.sft_weight > 0 else (["sigmoid"], None)
    checkpoint = checkpoints_activations(config, device, batch, lengths)
    args = TRLDPOConfig(**trainer_args(config, device, dtype, planned, batch, workdir.name, checkpoint), beta=config.beta,
                        loss_type=losses[0], loss_weights=losses[1], precompute_ref_log_probs=False)
    set_seed(config.seed)  # after the process group is up: every rank draws the same LoRA init
    loaded = load_model(config, device, dtype, style, vision)
    reference = None if loaded.is_lora else copy.deepcopy(loaded.model).eval().requires_grad_(False)
    progress = Progress(config, planned, log_interval(config, planned),
                        {"loss": "loss", "margin": "rewards/margins", "accuracy": "rewards/accuracies",
                         "lr": "learning_rate"})
    pairs = dataset(rows, ("prompt", "chosen", "rejected"), vision)
    trainer = LoupeDPOTrainer(model=loaded.model, ref_model=reference, args=args, train_dataset=pairs,
                              eval_dataset=pairs, processing_class=loaded.tokenizer, callbacks=[progress],
                              lr_factor=schedule(config, progress))
    return _run(trainer, progress, loaded, rows, planned, batch, workdir)


def sharded(trainer) -> bool:
    """Whether each rank holds only a shard of the weights (FSDP, DeepSpeed ZeRO-3)."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return bool(trainer.is_fsdp_enabled or (plugin is not None and plugin.zero_stage == 3))


def save_run(trainer, loaded: Loaded, config, algorithm: str, metrics: dict, trace: RowTrace | None = None) -> None:
    """Write the checkpoint dir of a trained TRL run from rank 0 (SFT, DPO, GRPO alike). Every rank must call it:
    a sharded model is gathered first (a collective), unsharded ranks compare their weights, and all wait for rank
    0 to be done writing. DPO's and GRPO's frozen "ref" adapter (the reference of a fresh LoRA) is left out."""
    model = loaded.model
    vision = getattr(model.config, "vision_config", None) is not None  # the loaded model says what it is
    if sharded(trainer):
        state = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # the full weights, on rank 0 only
        if distributed.is_main():
            dtype = resolve_dtype(config.dtype, trainer.args.device)
            with distributed.whole_model_load():  # not zero.Init on rank 0 alone (ZeRO-3's config is still alive)
                loaded = load_model(config, torch.device("cpu"), dtype, loaded.prompt_style, vision)
            state = {k: v for k, v in state.items() if ".ref." not in k}
            missing = loaded.model.load_state_dict(state, strict=False).missing_keys
            if missing:
                raise TrainerError(f"the gathered weights lack {len(missing)} tensors, e.g. {missing[0]}")
    else:
        if loaded.is_lora and "ref" in model.peft_config:
            model.delete_adapter("ref")
        if trace is not None and trace.trace:  # before save_checkpoint merges a LoRA on rank 0 alone
            trace.trace.write({"weights_sha256": distributed.weights_digest(model)})
        distributed.check_same_weights(model)
    if distributed.is_main():
        save_checkpoint(loaded, config.out, algorithm=algorithm, config=config_dict(config),
                        data_sha256=sha256_file(config.data), metrics=metrics)
        forget_processor_class(config.out)
    trainer.accelerator.wait_for_everyone()


def _save(run: Run, config, algorithm: str, metrics: dict) -> None:
    save_run(run.trainer, run.loaded, config, algorithm, metrics, run.trace)
    run.workdir.cleanup()


def _train(run: Run) -> list[dict]:
    run.trainer.train()
    if not run.progress.history:
        raise TrainerError("no optimizer step ran (max_steps 0?)")
    return run.progress.history


def _stop(run: Run, config, what: str) -> dict:
    return stop_report(config, steps=len(run.progress.history), planned=run.planned, rows=run.rows, what=what,
                       timed_out=run.progress.timed_out)


def train_sft(config, rows: list[dict], style: str, vision: bool, val: list[dict] | None = None) -> dict:
    """Train on ``rows``, save to ``config.out``; returns the metrics."""
    run = prepare_sft(config, rows, style, vision, val)
    history = _train(run)
    seconds = run.progress.timer.elapsed()
    tail = history[-min(len(history), 10):]
    metrics = {"algorithm": "sft", "model": "vlm" if vision else "text", "steps": len(history),
               "epochs": math.ceil(run.trainer.state.epoch or 0), "first_loss": history[0]["loss"],
               "final_loss": sum(h["loss"] for h in tail) / len(tail), "train_seconds": seconds,
               "seconds_per_step": seconds / len(history),
               "tokens": run.progress.tokens, "tokens_per_s": run.progress.tokens / max(seconds, 1e-9),
               "rows": run.rows, "prompt_style": style, "planned_steps": run.planned, **_stop(run, config, "rows")}
    if run.best is not None:
        metrics.update(run.best.report())
        if run.best.early:
            metrics["stopped_by"] = "early_stop"
            metrics["warnings"] = [*metrics["warnings"], (
                f"Stopped at step {len(history)} of {run.planned}: the loss on {len(val)} held-out rows had not "
                f"improved for {config.patience} progress lines; the checkpoint has the weights of step "
                f"{run.best.step}.")]
    _save(run, config, "sft", metrics)
    return metrics


def train_dpo(config, rows: list[dict], style: str, vision: bool, lengths: list[int] | None = None) -> dict:
    """Train on the pairs in ``rows``, save to ``config.out``; returns the metrics. The log-probability margins
    (chosen minus rejected) over every pair come from one evaluation after training: the margin before is the
    reference's (the policy starts as the frozen init), the policy's margin less TRL's reward margin over beta. An
    evaluation before training would also cost a pass, and with transformers 5.24 it leaves train() without its DDP
    wrapper: ranks would not average their gradients (seen: LoRA weights diverged)."""
    run = prepare_dpo(config, rows, style, vision, lengths)
    history = _train(run)
    seconds = run.progress.timer.elapsed()
    after = run.trainer.evaluate()
    margin_after = after["eval_logps/chosen"] - after["eval_logps/rejected"]
    metrics = {"algorithm": "dpo", "model": "vlm" if vision else "text", "steps": len(history), "pairs": run.rows,
               "first_loss": history[0]["loss"], "final_loss": history[-1]["loss"],
               "logp_margin_before": margin_after - after["eval_rewards/margins"] / config.beta,
               "logp_margin_after": margin_after,
               "reward_margin": after["eval_rewards/margins"], "pairs_improved": after["eval_rewards/accuracies"],
               "train_seconds": seconds, "prompt_style": style, "planned_steps": run.planned,
               **_stop(run, config, "pairs")}
    _save(run, config, "dpo", metrics)
    return metrics
