"""Models, tokenizers and the checkpoint format.

``tiny`` is a small Llama-shaped decoder built from ``trainer/tiny_config.json`` with a tokenizer
the project builds itself (no download, trainer/tokenizer.py): 256 byte symbols, whole-word and
number tokens from the merges shipped in the repo, a handful of special tokens, and a Jinja chat
template so ``tokenizer.apply_chat_template(messages,
add_generation_prompt=True)`` works like it does for any chat model. Any other HF causal LM is
loaded by path. A checkpoint is a plain HF directory (``model.safetensors``, ``config.json``,
tokenizer files) plus ``loupe.json`` (what produced it, the ``prompt_style`` of agent.prompt it
reads: rollouts render with it, training renders its rows in it, and the ``action_format`` it answers
in and whether it ``reads_images``, both inherited from its init) and ``metrics.json``; with LoRA
the merged weights sit at the top and the PEFT adapter (what vLLM loads) in ``adapter/``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer.errors import TrainerError  # noqa: F401 (the trainer's modules import it from here)
from trainer.tokenizer import CHAT_TEMPLATE, SPECIAL_TOKENS, build_tokenizer  # noqa: F401 (re-exported)

log = logging.getLogger("trainer")

TINY = "tiny"
TINY_CONFIG_PATH = Path(__file__).with_name("tiny_config.json")
LOUPE_FILE = "loupe.json"
METRICS_FILE = "metrics.json"
ADAPTER_DIR = "adapter"
# The tiny model reads the named prompt (agent/prompt.py): the full system prompt alone is longer than
# its screens, and without the Named: lines it does not learn to find the centre of the element a task names.
TINY_PROMPT_STYLE = "named"
DEFAULT_PROMPT_STYLE = "full"  # any other model, and checkpoints that predate prompt styles


def tiny_config():
    """The LlamaConfig of the tiny model, read from ``trainer/tiny_config.json``."""
    from transformers import LlamaConfig

    with open(TINY_CONFIG_PATH) as fh:
        return LlamaConfig(**json.load(fh))


def build_tiny(seed: int = 0):
    """A freshly initialised tiny model and its tokenizer. Returns (model, tokenizer)."""
    from transformers import LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = tiny_config()
    config.vocab_size = len(tokenizer)  # the shipped merges decide it (trainer/tokenizer.py)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def resolve_device(spec: str = "auto") -> torch.device:
    """'auto' -> cuda when available, else cpu."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec == "cuda" and not torch.cuda.is_available():
        raise TrainerError("--device cuda was asked for but no CUDA device is available")
    return torch.device(spec)


def resolve_dtype(spec: str, device: torch.device) -> torch.dtype:
    """'auto' -> bf16 on CUDA (when supported), fp32 on CPU."""
    if spec == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[spec]


# Below this width a model's forward is mostly Python overhead, not matmuls: bfloat16 gains nothing there, and
# float32 keeps its figures exact (the tests' tiny models). SmolLM2-135M is 576 wide.
MIXED_PRECISION_MIN_WIDTH = 512


def cpu_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AMX or AVX-512 BF16): the local policy's test."""
    from agent.policies.local import cpu_multiplies_bf16

    return cpu_multiplies_bf16()


def text_config(init: str | os.PathLike) -> dict:
    """``init``'s config.json with its language model's part (a VLM's ``text_config``) over the top level; {} when
    unknown, as for 'tiny'."""
    file = Path(init) / "config.json" if str(init) != TINY else None
    if file is None or not file.is_file():
        return {}
    try:
        config = json.loads(file.read_text())
    except (OSError, ValueError):
        return {}
    return {**config, **(config.get("text_config") or {})} if isinstance(config, dict) else {}


def model_width(init: str | os.PathLike) -> int:
    """The hidden size of ``init``'s language model (its config.json; 0 when unknown, as for 'tiny')."""
    return int(text_config(init).get("hidden_size") or 0)


def cpu_autocast(spec: str, device: torch.device, init: str | os.PathLike) -> bool:
    """Whether a run with ``--dtype spec`` trains in bfloat16 autocast over float32 weights: 'auto' on a CPU that
    multiplies bfloat16 natively, for a model wide enough that matmuls are its cost (about 3x fewer CPU seconds a
    LoRA step of SmolLM2-135M on the 2-core machine; trainer/README.md)."""
    return spec == "auto" and device.type == "cpu" and cpu_bf16() and model_width(init) >= MIXED_PRECISION_MIN_WIDTH


@dataclass
class Loaded:
    """What :func:`load` returns: the model, its tokenizer and where it came from."""

    model: Any
    tokenizer: Any
    parent: str | None  # absolute path of the init checkpoint, None for a fresh tiny model
    base_model: str  # "tiny" or the first ancestor's path / name
    is_lora: bool = False
    prompt_style: str = DEFAULT_PROMPT_STYLE  # agent.prompt style the model reads (recorded in loupe.json)


def load(init: str, *, device: torch.device | None = None, dtype: torch.dtype = torch.float32,
         lora: str = "", seed: int = 0) -> Loaded:
    """Load ``init`` ('tiny' or a checkpoint / HF model dir) for training, optionally wrapped in LoRA."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or torch.device("cpu")
    if init == TINY:
        model, tokenizer = build_tiny(seed)
        parent, base, style = None, TINY, TINY_PROMPT_STYLE
    else:
        path = Path(init)
        if not (path / "config.json").is_file():
            raise TrainerError(f"--init {init!r} is not 'tiny' nor a checkpoint dir (no config.json there)")
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        parent = str(path.resolve())
        base = read_loupe(path).get("base_model") or parent
        style = checkpoint_prompt_style(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device=device, dtype=dtype)
    is_lora = bool(lora)
    if is_lora:
        from peft import get_peft_model

        model = get_peft_model(model, parse_lora(lora))
    return Loaded(model=model, tokenizer=tokenizer, parent=parent, base_model=base, is_lora=is_lora,
                  prompt_style=style)


def parse_lora(spec: str):
    """'r=8' or 'r=16,alpha=32,dropout=0.05,targets=q_proj+v_proj' -> a PEFT LoraConfig."""
    from peft import LoraConfig

    values: dict[str, str] = {}
    for piece in (p.strip() for p in spec.split(",")):
        if not piece:
            continue
        if "=" not in piece:
            raise TrainerError(f"--lora {spec!r}: expected key=value pieces like r=8, got {piece!r}")
        key, value = piece.split("=", 1)
        values[key.strip()] = value.strip()
    unknown = set(values) - {"r", "alpha", "dropout", "targets"}
    if unknown:
        raise TrainerError(f"--lora: unknown keys {sorted(unknown)}; known: r, alpha, dropout, targets")
    try:
        rank = int(values.get("r", "8"))
        alpha = int(values.get("alpha", str(2 * rank)))
        dropout = float(values.get("dropout", "0"))
    except ValueError as exc:
        raise TrainerError(f"--lora {spec!r}: {exc}") from None
    targets: Any = values["targets"].split("+") if "targets" in values else "all-linear"
    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, task_type="CAUSAL_LM")


def chat_ids(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> list[int]:
    """Token ids of ``messages`` rendered with the tokenizer's chat template.

    Renders to text first and encodes without extra special tokens: the template already holds
    every special token, and the text route behaves the same across transformers versions.
    """
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (recorded in loupe.json so a checkpoint names its data)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_loupe(path: str | os.PathLike) -> dict:
    """A checkpoint's loupe.json, or {} for a plain HF model dir."""
    file = Path(path) / LOUPE_FILE
    return json.loads(file.read_text()) if file.is_file() else {}


def checkpoint_prompt_style(path: str | os.PathLike) -> str:
    """The prompt style a checkpoint (or plain HF model dir) reads: its loupe.json's, else full."""
    return read_loupe(path).get("prompt_style") or DEFAULT_PROMPT_STYLE


def load_tokenizer(init: str):
    """The tokenizer of a text ``init`` (the tiny model's own for 'tiny'), with a pad token."""
    if init == TINY:
        tokenizer = build_tokenizer()
    else:
        if not (Path(init) / "config.json").is_file():
            raise TrainerError(f"--init {init!r} is not 'tiny' nor a checkpoint dir (no config.json there)")
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(init, local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def run_style(config) -> str:
    """The prompt style a run trains in: the option's, or for 'auto' the init's (named for tiny, full for a plain HF
    dir); the checkpoint records it."""
    if config.prompt_style != "auto":
        return config.prompt_style
    return TINY_PROMPT_STYLE if config.init == TINY else checkpoint_prompt_style(config.init)


def training_prompt_style(loaded: Loaded, spec: str) -> str:
    """The prompt style a run trains in (``spec``, or the init's for 'auto'); the checkpoint records it."""
    if spec != "auto":
        loaded.prompt_style = spec
    return loaded.prompt_style


def save_checkpoint(loaded: Loaded, out: str | os.PathLike, *, algorithm: str, config: dict,
                    data_sha256: str | None, metrics: dict) -> Path:
    """Write an HF-format checkpoint to ``out`` with loupe.json and metrics.json.

    With LoRA the adapter goes to ``out/adapter`` (PEFT format, loadable by vLLM's runtime LoRA
    loading against the base) and the merged weights to ``out`` itself, so local inference and
    the next training run need nothing but this dir.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model = loaded.model
    if loaded.is_lora:
        model.save_pretrained(out / ADAPTER_DIR)
        model = model.merge_and_unload()
        loaded.model = model
        loaded.is_lora = False
    model.save_pretrained(out, safe_serialization=True)
    loaded.tokenizer.save_pretrained(out)
    # the format the model answers in and whether it reads screenshots pass from the init to what it trains into
    # (the flywheel registers a run's checkpoint with them, agent.formats renders its rows in them)
    ancestor = read_loupe(loaded.parent) if loaded.parent else {}
    record = {
        "action_format": config.get("action_format") or ancestor.get("action_format", "loupe"),
        "reads_images": ancestor.get("reads_images", getattr(model.config, "vision_config", None) is not None),
        "algorithm": algorithm,
        "config": config,
        "data_sha256": data_sha256,
        "parent": loaded.parent,
        "base_model": loaded.base_model,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "adapter": ADAPTER_DIR if (out / ADAPTER_DIR).is_dir() else None,
        "prompt_style": loaded.prompt_style,
    }
    (out / LOUPE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    write_metrics(out, metrics)
    return out


def write_metrics(out: str | os.PathLike, metrics: dict) -> None:
    """metrics.json in ``out`` (created if missing)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / METRICS_FILE).write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")


def save_tiny_untrained(out: str | os.PathLike, seed: int = 0) -> Path:
    """An untrained tiny checkpoint (the baseline tests and evals compare against)."""
    model, tokenizer = build_tiny(seed)
    loaded = Loaded(model=model, tokenizer=tokenizer, parent=None, base_model=TINY, prompt_style=TINY_PROMPT_STYLE)
    return save_checkpoint(loaded, out, algorithm="init", config={"seed": seed}, data_sha256=None, metrics={})
