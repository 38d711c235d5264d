"""Whether a PEFT LoRA adapter fits a model, checked before it is applied.

PEFT applies an adapter by the *names* in its adapter_config.json (``target_modules``: ``q_proj``, ``v_proj``, ...)
and then loads its tensors leniently: an adapter of another model whose layers have the same short names (the tiny
text model's on Qwen2.5-VL, whose language layers live under ``model.language_model``) gets fresh LoRA layers, none
of its tensors land, and the result is the base model under the adapter's name, with no error. So the adapter's own
tensors are the test: each ``<module>.lora_A.weight`` / ``lora_B.weight`` must name a linear module of the model
whose input (A) and output (B) sizes it has. Shapes are read from the safetensors header; nothing is loaded.
``base_model_name_or_path`` is only reported: the same base may sit at another path where it is served.

vLLM fails the same way, and by names alone (vllm#48022): it renames an adapter's modules with the served model
class's ``hf_to_vllm_mapper`` prefix rules and applies the adapter where a renamed module exists, so a module name that
no rule maps to the served model's own (a missing or extra ``model.``) is loaded and applies nothing, with no error.
:func:`served_adapter_mismatch` checks an adapter dir against a checkpoint dir of the served base (its weights' names
and shapes from the safetensors headers) after renaming both sides as vLLM does; the flywheel runs it as a program
(``python -m trainer.adapters ADAPTER BASE``) before it asks vLLM to load an adapter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PREFIX = "base_model.model."  # PEFT's prefix of the wrapped model's parameter names
WEIGHTS = "adapter_model.safetensors"
# vLLM's hf_to_vllm_mapper prefix rules (vllm/model_executor/models/<model>.py, v0.31), applied in order, each to what
# the rules before it left: both of Qwen2.5-VL's name schemes (transformers' model.language_model./model.visual. and
# the hub checkpoints' model./visual.) reach its modules. Qwen3-VL has no rule for a bare "model." (vllm#48022): a text
# LoRA's model.layers.* reaches nothing there. A class not named here has no mapper in vLLM (names kept as they are).
_QWEN_VL = (("model.language_model.", "language_model.model."), ("model.visual.", "visual."),
            ("lm_head.", "language_model.lm_head."), ("model.", "language_model.model."))
VLLM_PREFIXES = {
    "Qwen2VLForConditionalGeneration": _QWEN_VL,
    "Qwen2_5_VLForConditionalGeneration": _QWEN_VL,
    "Qwen3VLForConditionalGeneration": (("model.visual.", "visual."), ("lm_head.", "language_model.lm_head."),
                                        ("model.language_model.", "language_model.model.")),
}


def _read_config(adapter: Path) -> dict:
    try:
        config = json.loads((adapter / "adapter_config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"its adapter_config.json cannot be read ({exc})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise ValueError(f"it is not a LoRA adapter (peft_type {config.get('peft_type') if isinstance(config, dict) else None!r})")
    return config


def _lora_shapes(adapter: Path) -> tuple[dict, str]:
    """The adapter's LoRA tensors' shapes by key and the base it names; ValueError saying what is wrong with the dir."""
    from safetensors import safe_open

    config = _read_config(adapter)
    if not (adapter / WEIGHTS).is_file():
        raise ValueError(f"it has no {WEIGHTS}")
    with safe_open(adapter / WEIGHTS, framework="numpy") as tensors:  # shapes only: no torch import
        shapes = {key: tuple(tensors.get_slice(key).get_shape()) for key in tensors.keys()}
    lora = {key: shape for key, shape in shapes.items() if ".lora_A." in key or ".lora_B." in key}
    if not lora:
        raise ValueError("it holds no LoRA tensors (lora_A / lora_B)")
    return lora, config.get("base_model_name_or_path") or "an unnamed base"


def _mismatch(lora: dict, linear: dict, trained_on: str, rename=lambda name: name) -> tuple[str, list[str]]:
    """The first shape that does not fit (one line, or ''), and the adapter's modules that ``linear`` (a module name,
    as ``rename`` gives it: its (outputs, inputs)) lacks."""
    missing = []
    for key, shape in sorted(lora.items()):
        name, _, part = key.removeprefix(PREFIX).partition(".lora_")
        sizes = linear.get(rename(name))
        if sizes is None:
            missing.append(name)
            continue
        out_features, in_features = sizes
        size, wanted = (shape[1], in_features) if part.startswith("A") else (shape[0], out_features)
        if len(shape) != 2 or size != wanted:
            side = "inputs" if part.startswith("A") else "outputs"
            return (f"it was trained on a base of other shapes ({trained_on}): its {key} is {list(shape)} but the "
                    f"served model's {name} has {wanted} {side}"), missing
    return "", sorted(set(missing))


def adapter_mismatch(adapter: str | Path, model) -> str:
    """'' when every LoRA tensor of the adapter dir fits a module of ``model`` (a transformers model, not wrapped);
    otherwise one line saying what does not fit, for the person who picked the adapter."""
    try:
        lora, trained_on = _lora_shapes(Path(adapter))
    except ValueError as exc:
        return str(exc)
    linear = {name: tuple(module.weight.shape) for name, module in model.named_modules()
              if getattr(module, "weight", None) is not None and module.weight.dim() == 2}
    problem, missing = _mismatch(lora, linear, trained_on)
    if problem or not missing:
        return problem
    return (f"it was trained on another base ({trained_on}): {len(missing)} of the modules it adapts are "
            f"not in the served model, e.g. {missing[0]}")


def _base_shapes(base: Path) -> dict:
    """Every tensor of a checkpoint dir's safetensors (one file or an index's shards): its shape, by name."""
    from safetensors import safe_open

    index = base / "model.safetensors.index.json"
    try:
        files = (sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.is_file()
                 else [path.name for path in base.glob("*.safetensors")])
    except (OSError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"its weight index {index} cannot be read ({exc})") from None
    if not files:
        raise ValueError(f"{base} holds no safetensors weights")
    shapes = {}
    for name in files:
        with safe_open(base / name, framework="numpy") as tensors:
            shapes.update({key: tuple(tensors.get_slice(key).get_shape()) for key in tensors.keys()})
    return shapes


def vllm_name(name: str, architecture: str) -> str:
    """A module's name as vLLM's model class ``architecture`` renames it on load (its hf_to_vllm_mapper's prefixes)."""
    for prefix, new in VLLM_PREFIXES.get(architecture, ()):
        if name.startswith(prefix):
            name = new + name[len(prefix):]
    return name


def served_adapter_mismatch(adapter: str | Path, base: str | Path) -> str:
    """'' when vLLM, serving the checkpoint dir ``base``, would apply every LoRA tensor of the adapter dir: its module,
    renamed as vLLM renames the base's architecture's names, is a linear weight of the base (renamed the same way)
    with the sizes the tensor needs. Otherwise one line saying what does not fit; nothing is loaded."""
    base = Path(base)
    try:
        lora, trained_on = _lora_shapes(Path(adapter))
    except ValueError as exc:
        return str(exc)
    try:
        architecture = (json.loads((base / "config.json").read_text()).get("architectures") or [""])[0]
        shapes = _base_shapes(base)
    except (OSError, ValueError) as exc:
        return f"the served base {base} cannot be read to check it against ({exc})"
    linear = {vllm_name(key.removesuffix(".weight"), architecture): shape for key, shape in shapes.items()
              if key.endswith(".weight") and len(shape) == 2}
    problem, missing = _mismatch(lora, linear, trained_on, lambda name: vllm_name(name, architecture))
    if problem or not missing:
        return problem
    return (f"vLLM would load it and apply nothing to {len(missing)} of the modules it adapts: their names, as vLLM "
            f"renames them for {architecture or 'this model'}, are not modules of the served base {base.name}, e.g. "
            f"{missing[0]} (becomes {vllm_name(missing[0], architecture)}). Was it trained on another base, or saved "
            "with another prefix?")


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.adapters ADAPTER BASE``: prints ``{"problem": ...}`` ('' when the adapter fits); exit 2
    when it does not fit, 0 when it does."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m trainer.adapters ADAPTER_DIR BASE_CHECKPOINT_DIR", file=sys.stderr)
        return 2
    problem = served_adapter_mismatch(args[0], args[1])
    print(json.dumps({"problem": problem}))
    return 2 if problem else 0


__all__ = ["VLLM_PREFIXES", "adapter_mismatch", "served_adapter_mismatch", "vllm_name"]


if __name__ == "__main__":
    sys.exit(main())
