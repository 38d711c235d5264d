"""Vision-language checkpoints: which ``--init`` is one, and its rows with their screenshots.

``python -m trainer sft|dpo --init DIR`` reads these rows when DIR's config.json has a ``vision_config``
(Qwen2.5-VL, ``python -c "from trainer.tiny_vlm import save_tiny_vlm; save_tiny_vlm('vlm')"``) and trains through
TRL as for every model (trainer/trl_trainers.py).

Rows are the snapshot rows of data.py, message contents plain strings, with the screenshots in ``images``::

    {"messages": [{"role": "system", ...}, {"role": "user", ...}, {"role": "assistant", ...}, ...],
     "images": ["images/step-3.png", ...]}                       # SFT
    {"prompt": [...], "chosen": [...], "rejected": [...], "images": [...]}   # DPO

Each image is a path relative to the JSONL file's directory (the flywheel's export bundle keeps them in
``images/``), an absolute path, or a ``data:image/...;base64,`` URI. Images go one to a user turn, to the last
``len(images)`` user turns in order: one image per user turn when there are as many, and a single image is the
screen of the last user turn (a step row: the earlier screens are in the history as text). In its turn the image
follows the text, as agent.prompt.render_messages places it when the policy acts. More images than user turns is
an error naming the file and line.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from pathlib import Path

from agent import rows as R
from trainer import data as D
from trainer.model import TrainerError, checkpoint_prompt_style

log = logging.getLogger("trainer")

DATA_URI = "data:image/"


def check_chat_template(processor, init: str | os.PathLike) -> None:
    """Refuse, before training, a chat template TRL cannot mark for assistant-only loss. TRL's SFT of a VLM trains on
    the assistant turns by the template's ``{% generation %}`` marks; a template without them it swaps for its own
    marked copy, but only for the templates it ships (trl/chat_templates: Qwen2.5-VL's, Qwen3-VL's, ...), compared
    character for character. Any other (a checkpoint whose template was edited, another family) made TRL raise a
    ValueError deep in the trainer's set-up."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = getattr(processor, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default")
    if not template:
        raise TrainerError(f"--init {init}: the processor has no chat template; SFT of a vision-language model "
                           "renders its rows with it")
    if has_generation_markers(template):
        return
    try:
        get_training_chat_template(processor)
    except ValueError:
        raise TrainerError(
            f"--init {init}: its chat template is not one TRL knows how to mark for training on the answers alone "
            "(TRL ships marked copies of Qwen2.5-VL's, Qwen3-VL's and other families' templates, matched character "
            "for character). Put {% generation %} ... {% endgeneration %} around the assistant's text in the dir's "
            "chat_template.jinja, or use the model family's template unchanged") from None


def prompt_style(config) -> str:
    """The prompt style a VLM run trains in: the option's, or for 'auto' the init's (full for a plain HF dir)."""
    return config.prompt_style if config.prompt_style != "auto" else checkpoint_prompt_style(config.init)


def image_ref(spec, base: Path, where: str) -> dict:
    """One ``images`` entry as a datasets Image value: ``{"path": ..., "bytes": None}`` or the decoded data URI."""
    if not isinstance(spec, str) or not spec:
        raise TrainerError(f"{where}: an image must be a path or a data:image/...;base64 URI, got {spec!r}")
    if spec.startswith(DATA_URI):
        header, _, payload = spec.partition(",")
        if not header.endswith(";base64") or not payload:
            raise TrainerError(f"{where}: a data URI image must be data:image/<type>;base64,<data>")
        try:
            return {"path": None, "bytes": base64.b64decode(payload, validate=True)}
        except binascii.Error:
            raise TrainerError(f"{where}: the data URI image is not valid base64") from None
    path = Path(spec) if Path(spec).is_absolute() else base / spec
    if not path.is_file():
        raise TrainerError(f"{where}: image {spec!r} not found (looked at {path})")
    return {"path": str(path.resolve()), "bytes": None}


def structured(messages: list[dict], images: int, where: str) -> list[dict]:
    """``messages`` with every content a list of parts, and an image part after the text of each of the last
    ``images`` user turns (the datasets column needs one content type; TRL fills the image parts in order)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    if images > len(users):
        raise TrainerError(f"{where}: {images} images but {len(users)} user turns; each image goes with a user turn")
    with_image = set(users[len(users) - images:]) if images else set()
    return [{"role": m["role"],
             "content": [{"type": "text", "text": m["content"]}] + ([{"type": "image", "text": None}]
                                                                    if i in with_image else [])}
            for i, m in enumerate(messages)]


def _images(row: dict, base: Path, where: str) -> list[dict]:
    images = row.get("images") or []
    if not isinstance(images, list):
        raise TrainerError(f"{where}: 'images' must be a list of paths or data URIs")
    return [image_ref(spec, base, f"{where}: images[{i}]") for i, spec in enumerate(images)]


def _check_target(row: dict, where: str, style: str, action_format: str | None) -> bool:
    """A row rendered for another model (its ``rendered_for``: format or prompt style) is refused, naming the row;
    legacy rows without it pass (data.check_rendered_for). True when the row records what it was rendered for: its
    prompt is then used as it is, never re-rendered (as data.restyle does for text rows)."""
    if row.get("rendered_for") is None:
        return False
    try:
        rendered_for = R.RenderedFor.from_dict(row["rendered_for"], where)
    except ValueError as exc:
        raise TrainerError(str(exc)) from None
    D.check_rendered_for(rendered_for, where, action_format=action_format, style=style)
    return True


def _restyled(messages: list[dict], style: str, rendered: bool) -> list[dict]:
    """A legacy row's messages re-rendered in ``style``; a row rendered for this model's style as it is."""
    if rendered:
        return messages
    (messages,), _ = D.restyle([messages], style)
    return messages


def read_sft_rows(path: str | os.PathLike, style: str, action_format: str | None = None) -> list[dict]:
    """SFT rows as TRL's conversational vision rows: ``{"messages": [structured], "images": [refs], "row": line}``
    (``row``: the line number in the file, which a multi-process run's trace names; trainer/distributed.py).
    A legacy row's messages are re-rendered in prompt ``style`` first, as sft.py does for text models; a row that
    records what it was rendered for is used as it is (refused when rendered for another style or format)."""
    base = Path(path).resolve().parent
    rows = []
    for lineno, row in D.read_jsonl(path):
        where = f"{path}:{lineno}"
        if "messages" not in row:
            raise TrainerError(f"{where}: an SFT row needs a 'messages' list (keys found: {sorted(row)})")
        rendered = _check_target(row, where, style, action_format)
        messages = D._check_messages(row["messages"], f"{where}: messages")
        if not any(m["role"] == "assistant" for m in messages):
            raise TrainerError(f"{where}: messages: no assistant turn, nothing to learn from")
        messages = _restyled(messages, style, rendered)
        images = _images(row, base, where)
        rows.append({"messages": structured(messages, len(images), where), "images": images, "row": lineno})
    return rows


def read_dpo_rows(path: str | os.PathLike, style: str, action_format: str | None = None) -> list[dict]:
    """DPO rows as TRL's vision preference rows (``prompt``, ``chosen``, ``rejected`` structured, ``images``, the
    line number ``row``).
    A row whose chosen and rejected completions are the same text is left out, as data.read_dpo does."""
    base = Path(path).resolve().parent
    rows, same = [], 0
    for lineno, row in D.read_jsonl(path):
        where = f"{path}:{lineno}"
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
        if missing:
            raise TrainerError(f"{where}: a DPO row needs prompt, chosen and rejected; missing {missing}")
        rendered = _check_target(row, where, style, action_format)
        prompt = D._check_messages(row["prompt"], f"{where}: prompt")
        chosen = D._check_messages(row["chosen"], f"{where}: chosen", assistant_only=True)
        rejected = D._check_messages(row["rejected"], f"{where}: rejected", assistant_only=True)
        if D._completion_text(chosen) == D._completion_text(rejected):
            same += 1
            continue
        prompt = _restyled(prompt, style, rendered)
        images = _images(row, base, where)
        rows.append({"prompt": structured(prompt, len(images), where), "chosen": structured(chosen, 0, where),
                     "rejected": structured(rejected, 0, where), "images": images, "row": lineno})
    if same and not rows:
        raise TrainerError(f"{path}: every DPO row's chosen completion equals its rejected one; "
                           "there is no preference to learn")
    if same:
        log.warning("%s: %d DPO row(s) left out: their chosen and rejected completions are the same", path, same)
    return rows


__all__ = ["check_chat_template", "read_sft_rows", "read_dpo_rows"]
