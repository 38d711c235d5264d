"""Several training processes (``torchrun`` / ``accelerate launch``): which one this is, and what only one does.

A launcher starts N copies of ``python -m trainer ...`` and tells each its place through the environment
(``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``); TRL's trainers (through accelerate) join them into one process group
(NCCL on GPUs, gloo on CPUs), deal each rank its own rows and average the gradients. What Loupe adds:

- Rank 0 speaks for the run. Its stdout carries the progress lines and the ``done`` line (the train worker reads
  stdout, and torchrun passes every rank's stdout through to its own), it writes the checkpoint dir. The other
  ranks' stdout is pointed at stderr (:func:`quiet_stdout`), so nothing they or a library print can reach the
  worker as progress.
- Decisions that must be the same on every rank are taken once: the time budget's clock is rank 0's
  (:func:`broadcast`); a rank that stopped alone would leave the others waiting in an all-reduce for ever.
- A launch that would not do what was asked is refused with one line (:func:`check_launch`):
  ``accelerate launch --cpu --num_processes N`` starts ONE process (accelerate 1.16 wants mpirun for several CPU
  processes; it sets MASTER_ADDR but no WORLD_SIZE), a DeepSpeed config without deepspeed installed, and several
  processes for a command that has no data-parallel loop (eval, demos: each process would do all the work and write
  the same dir).
- ``LOUPE_TRAINER_TRACE=<dir>``: each rank writes ``trace-rank<R>.jsonl`` there: the rows of every optimizer step
  (their line numbers in the snapshot) and, at the end, a digest of its weights. The tests read it to prove the
  ranks trained on disjoint rows and ended equal; a person can read it when a multi-GPU run looks wrong.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from trainer.model import TrainerError, resolve_dtype

TRACE_ENV = "LOUPE_TRAINER_TRACE"
# Commands whose multi-process run is data-parallel (TRL's trainers), for every model
DATA_PARALLEL = ("sft", "dpo", "rl")
EVERY_MODEL = DATA_PARALLEL


def world_size() -> int:
    """How many training processes the launcher started (1 without a launcher)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's place among all of them (0 speaks for the run)."""
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    """This process's place on its own machine: the GPU it trains on."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main() -> bool:
    return rank() == 0


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def uses_deepspeed() -> bool:
    """Whether accelerate launched this process with a DeepSpeed config."""
    return _env_true("ACCELERATE_USE_DEEPSPEED")


def uses_fsdp() -> bool:
    """Whether accelerate launched this process with an FSDP config."""
    return _env_true("ACCELERATE_USE_FSDP")


def check_launch(command: str, vlm: bool) -> None:
    """Refuse a launch that would not train as asked (see the module docstring); ``vlm``: the init is a
    vision-language checkpoint (its runs go through TRL)."""
    if world_size() == 1 and "ACCELERATE_USE_CPU" in os.environ and os.environ.get("MASTER_ADDR"):
        # accelerate's one-process launcher, yet it set MASTER_ADDR: it was asked for several processes
        raise TrainerError("accelerate launch started ONE process where several were asked for (it does so with "
                           "--cpu, or without a GPU and without a config: several CPU processes need mpirun there): "
                           "use torchrun --nproc-per-node N -m trainer ..., or accelerate launch --config_file "
                           "trainer/launch/ddp.yaml --num_processes N -m trainer ... (gloo without a GPU)")
    if uses_deepspeed() and importlib.util.find_spec("deepspeed") is None:
        raise TrainerError("the launch config asks for DeepSpeed, which is not installed here: pip install "
                           "deepspeed in the training image (trainer/README.md), or use trainer/launch/fsdp.yaml")
    if world_size() > 1 and not (command in EVERY_MODEL or (vlm and command in DATA_PARALLEL)):
        raise TrainerError(f"{world_size()} processes were launched, but {command} "
                           f"{'of this checkpoint ' if command in DATA_PARALLEL else ''}trains in one process: only "
                           "sft, dpo and rl (TRL) split rows across processes; "
                           "run it without torchrun / accelerate launch")


def quiet_stdout() -> None:
    """On every rank but 0, send stdout (the file descriptor, so C code and subprocesses too) to stderr."""
    if is_main():
        return
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr


def device_of(device: torch.device) -> torch.device:
    """The device this rank trains on: with several processes on CUDA, the GPU of its local rank."""
    if device.type == "cuda" and world_size() > 1:
        torch.cuda.set_device(local_rank())
        return torch.device("cuda", local_rank())
    return device


@contextmanager
def whole_model_load():
    """``from_pretrained`` inside loads the whole weights into this process alone, even while a DeepSpeed ZeRO-3
    config is alive (accelerate keeps transformers' global reference to it for the engine's life): rank 0 rebuilding
    the model to save the gathered weights would otherwise enter ``deepspeed.zero.Init``, a collective that the other
    ranks never join (a hang) or that leaves the parameters empty partitions. The HF Trainer never rebuilds; Loupe
    does, to merge a LoRA and write its own checkpoint dir."""
    from transformers.integrations import deepspeed as hf_deepspeed

    kept = hf_deepspeed._hf_deepspeed_config_weak_ref
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = kept


def weights_dtype(config, device: torch.device) -> torch.dtype:
    """The dtype a TRL run loads the weights in. ``--dtype auto`` on a GPU: a full fine-tune keeps float32 weights,
    the optimizer's master copy, and computes in bfloat16 autocast (:func:`bf16_compute`), as the HF Trainer's and
    FSDP's mixed precision do: AdamW steps on bfloat16 weights round most small updates away. A LoRA's frozen base
    stays bfloat16 (half the memory; PEFT keeps the adapter in float32). ``--dtype bf16``: bfloat16 weights, as
    asked."""
    dtype = resolve_dtype(config.dtype, device)
    if dtype == torch.bfloat16 and config.dtype == "auto" and not getattr(config, "lora", ""):
        return torch.float32
    return dtype


def bf16_compute(config, device: torch.device) -> bool:
    """Whether a TRL run on a GPU computes in bfloat16 (the TrainingArguments' bf16: autocast over the weights)."""
    return device.type == "cuda" and resolve_dtype(config.dtype, device) == torch.bfloat16


def activation_checkpointing(device: torch.device) -> bool:
    """Whether the Trainer checkpoints activations itself: on a GPU, unless FSDP does (trainer/launch/fsdp.yaml's
    fsdp_activation_checkpointing, which checkpoints inside each sharded unit; the Trainer's would all-gather a
    unit's weights once more in the backward pass, and transformers refuses both at once)."""
    return device.type == "cuda" and not uses_fsdp()


def _group_ready() -> bool:
    return world_size() > 1 and torch.distributed.is_available() and torch.distributed.is_initialized()


def _group_device() -> torch.device:
    """Where the process group's tensors live: the rank's GPU for NCCL, the CPU for gloo."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast(value: float) -> float:
    """Rank 0's ``value`` on every rank (itself without a process group)."""
    if not _group_ready():
        return value
    tensor = torch.tensor([value], dtype=torch.float64, device=_group_device())
    torch.distributed.broadcast(tensor, src=0)
    return float(tensor.item())


def summed(counts: dict[str, float]) -> dict[str, float]:
    """Each count summed over all ranks (itself without a process group): what every rank counted of its own share,
    for the run's metrics."""
    if not _group_ready() or not counts:
        return counts
    names = sorted(counts)
    tensor = torch.tensor([float(counts[n]) for n in names], dtype=torch.float64, device=_group_device())
    torch.distributed.all_reduce(tensor)
    return {n: type(counts[n])(v) for n, v in zip(names, tensor.tolist(), strict=True)}


def tensor_digests(model: torch.nn.Module, trainable: bool = False) -> dict[str, str]:
    """sha256 of each parameter's bytes (in its own dtype), by name; ``trainable``: only those that train (when
    any do: a LoRA's adapter, not its frozen base, which no step changes)."""
    params = list(model.named_parameters())
    if trainable and any(p.requires_grad for _, p in params):
        params = [(n, p) for n, p in params if p.requires_grad]
    return {name: hashlib.sha256(param.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()).hexdigest()
            for name, param in params}


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 of every parameter's name and bytes, in name order: equal on two ranks iff their weights are."""
    digest = hashlib.sha256()
    for name, value in sorted(tensor_digests(model).items()):
        digest.update(name.encode())
        digest.update(value.encode())
    return digest.hexdigest()


def check_same_weights(model: torch.nn.Module) -> None:
    """Raise on every rank unless all ranks hold the same weights, tensor by tensor and bit for bit (data-parallel
    ranks end bit-equal: the same averaged gradients, the same optimizer). A wrapper that did not average the
    gradients would otherwise go unseen: rank 0 would save its own model, trained on its share of the rows alone.
    Each rank sends one digest a tensor (names and sha256 of the bytes), not the weights."""
    if not _group_ready():
        return
    mine = tensor_digests(model, trainable=True)
    every: list[dict[str, str] | None] = [None] * world_size()
    torch.distributed.all_gather_object(every, mine)
    differ = sorted({name for other in every for name in set(mine) | set(other)
                     if other.get(name) != mine.get(name)})
    if differ:
        raise TrainerError(f"the {world_size()} processes ended with different weights in {len(differ)} of "
                           f"{len(mine)} tensors (e.g. {differ[0]}): their gradients were not averaged, so the "
                           "checkpoint would hold one rank's share only")


class Trace:
    """This rank's ``trace-rank<R>.jsonl`` in ``$LOUPE_TRAINER_TRACE`` (a no-op when it is unset)."""

    def __init__(self) -> None:
        folder = os.environ.get(TRACE_ENV)
        self.file = Path(folder) / f"trace-rank{rank()}.jsonl" if folder else None
        if self.file:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.write_text("")

    def __bool__(self) -> bool:
        return self.file is not None

    def write(self, record: dict) -> None:
        if self.file:
            with self.file.open("a") as out:
                out.write(json.dumps({"rank": rank(), "world_size": world_size(), **record}) + "\n")


__all__ = ["world_size", "rank", "local_rank", "is_main", "check_launch", "quiet_stdout", "device_of", "broadcast",
           "summed", "tensor_digests", "weights_digest", "check_same_weights", "Trace", "uses_deepspeed", "uses_fsdp",
           "whole_model_load", "weights_dtype", "bf16_compute", "activation_checkpointing", "DATA_PARALLEL",
           "TRACE_ENV"]
