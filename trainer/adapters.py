"""Whether a PEFT LoRA adapter fits a model, checked before it is applied.

PEFT applies an adapter by the *names* in its adapter_config.json (``target_modules``: ``q_proj``, ``v_proj``, ...)
and then loads its tensors leniently: an adapter of another model whose layers have the same short names (the tiny
text model's on Qwen2.5-VL, whose language layers live under ``model.language_model``) gets fresh LoRA layers, none
of its tensors land, and the result is the base model under the adapter's name, with no error. So the adapter's own
tensors are the test: each ``<module>.lora_A.weight`` / ``lora_B.weight`` must name a linear module of the model
whose input (A) and output (B) sizes it has. Shapes are read from the safetensors header; nothing is loaded.
``base_model_name_or_path`` is only reported: the same base may sit at another path where it is served.
"""

from __future__ import annotations

import json
from pathlib import Path

PREFIX = "base_model.model."  # PEFT's prefix of the wrapped model's parameter names
WEIGHTS = "adapter_model.safetensors"


def _read_config(adapter: Path) -> dict:
    try:
        config = json.loads((adapter / "adapter_config.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"its adapter_config.json cannot be read ({exc})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise ValueError(f"it is not a LoRA adapter (peft_type {config.get('peft_type') if isinstance(config, dict) else None!r})")
    return config


def adapter_mismatch(adapter: str | Path, model) -> str:
    """'' when every LoRA tensor of the adapter dir fits a module of ``model`` (a transformers model, not wrapped);
    otherwise one line saying what does not fit, for the person who picked the adapter."""
    from safetensors import safe_open

    adapter = Path(adapter)
    try:
        config = _read_config(adapter)
    except ValueError as exc:
        return str(exc)
    if not (adapter / WEIGHTS).is_file():
        return f"it has no {WEIGHTS}"
    trained_on = config.get("base_model_name_or_path") or "an unnamed base"
    modules = dict(model.named_modules())
    with safe_open(adapter / WEIGHTS, framework="pt") as tensors:
        shapes = {key: tuple(tensors.get_slice(key).get_shape()) for key in tensors.keys()}
    lora = {key: shape for key, shape in shapes.items() if ".lora_A." in key or ".lora_B." in key}
    if not lora:
        return "it holds no LoRA tensors (lora_A / lora_B)"
    missing = []
    for key, shape in sorted(lora.items()):
        name, _, part = key.removeprefix(PREFIX).partition(".lora_")
        module = modules.get(name)
        weight = getattr(module, "weight", None)
        if weight is None or weight.dim() != 2:
            missing.append(name)
            continue
        out_features, in_features = weight.shape
        size, wanted = (shape[1], in_features) if part.startswith("A") else (shape[0], out_features)
        if len(shape) != 2 or size != wanted:
            side = "inputs" if part.startswith("A") else "outputs"
            return (f"it was trained on a base of other shapes ({trained_on}): its {key} is {list(shape)} but the "
                    f"served model's {name} has {wanted} {side}")
    if missing:
        modules_missing = sorted(set(missing))
        return (f"it was trained on another base ({trained_on}): {len(modules_missing)} of the modules it adapts are "
                f"not in the served model, e.g. {modules_missing[0]}")
    return ""


__all__ = ["adapter_mismatch"]
