"""Vision-language checkpoints behind ``python -m trainer serve``: chat messages with screenshots in, an answer with
the log-probability of every token out.

A request's messages are OpenAI's: a content is a string or a list of parts, ``{"type": "text", "text": ...}`` and
``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` (what agent.prompt.render_messages
writes). :func:`prepare` checks and decodes them, or raises :class:`RequestError` with what is wrong (the server
answers 400): only ``data:`` URLs (this server fetches nothing), images PIL can decode, at most
:data:`MAX_IMAGE_BYTES` each, :data:`MAX_IMAGE_PIXELS` pixels each and :data:`MAX_IMAGES` a request. The messages
then go through the checkpoint's own chat template and processor (trainer.tiny_vlm.load_processor: Qwen2.5-VL's,
image-only where torchvision is missing), so the prompt the model reads is the one TRL trains it on
(trainer/vlm_trl.py): each image after its turn's text.

:class:`VisionPolicy` generates with ``model.generate``: greedy at temperature 0, otherwise sampling from the plain
softmax at that temperature (the checkpoint's own top-k / top-p / repetition penalty are switched off, so a sampled
answer comes from the distribution its logprobs describe). Logprobs are those of the raw logits at temperature 1,
as agent.policies.local records them for the text model and the trainer recomputes them. A tiny, untrained VLM
answers garbage: that is an answer like any other, and the rollout loop makes it a void turn.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.policies.base import Policy, PolicyError, PolicyOutput

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_IMAGE_PIXELS", "Prepared", "RequestError", "VisionPolicy",
           "decode_image", "missing_processor", "prepare"]

MAX_IMAGE_BYTES = 10 * 2**20  # a 4K screenshot as PNG is about 5 MB
MAX_IMAGE_PIXELS = 4096 * 4096  # checked from the header, before decoding: a small file may claim a huge image
MAX_IMAGES = 16  # UI-TARS-1.5 reads 5 earlier screenshots and the current one


class RequestError(ValueError):
    """A request this server cannot take (bad message shape, image URL or image); the message says which."""


@dataclass
class Prepared:
    """A checked request: the processor's inputs, and how many prompt tokens they hold."""

    inputs: Any  # transformers BatchFeature: input_ids, attention_mask, pixel_values, image_grid_thw
    prompt_tokens: int
    images: int


def decode_image(url: object, where: str):
    """The RGB PIL image of a ``data:image/...;base64,`` URL; RequestError saying what is wrong otherwise."""
    from PIL import Image, UnidentifiedImageError

    if not isinstance(url, str) or not url:
        raise RequestError(f"{where}: image_url.url must be a data:image/...;base64 URL")
    if not url.startswith("data:"):
        shown = url if len(url) <= 60 else url[:57] + "..."
        raise RequestError(f"{where}: only data: URLs are accepted (data:image/png;base64,...); this server fetches "
                           f"nothing, got {shown!r}")
    header, comma, payload = url.partition(",")
    if not header.startswith("data:image/") or not header.endswith(";base64") or not comma:
        raise RequestError(f"{where}: a data URL image must be data:image/<type>;base64,<data>, got {header[:40]!r}")
    if len(payload) * 3 // 4 > MAX_IMAGE_BYTES:
        raise RequestError(f"{where}: the image is about {len(payload) * 3 // 4 / 2**20:.1f} MB, over the "
                           f"{MAX_IMAGE_BYTES / 2**20:.0f} MB cap")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError(f"{where}: the image is not valid base64") from None
    try:
        image = Image.open(io.BytesIO(data))
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise RequestError(f"{where}: the image is {width}x{height} pixels, over the cap of "
                               f"{MAX_IMAGE_PIXELS:,} pixels")
        image.load()
        return image.convert("RGB")
    except RequestError:
        raise
    except UnidentifiedImageError:
        raise RequestError(f"{where}: the data is not an image this server can read (PNG, JPEG, WebP, GIF, BMP)") \
            from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise RequestError(f"{where}: the image cannot be decoded ({type(exc).__name__}: {str(exc)[:100]})") from None


def _content(content: object, where: str, images: list) -> str | list[dict]:
    """One message content in the chat template's shape (image parts become ``{"type": "image"}``), its images
    decoded into ``images``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise RequestError(f"{where}: content must be a string or a non-empty list of parts")
    parts = []
    for i, part in enumerate(content):
        here = f"{where}.content[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            if not isinstance(part.get("text"), str):
                raise RequestError(f"{here}: a text part needs a string 'text'")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            spec = part.get("image_url")
            url = spec.get("url") if isinstance(spec, dict) else spec
            if len(images) >= MAX_IMAGES:
                raise RequestError(f"{here}: more than {MAX_IMAGES} images in one request")
            images.append(decode_image(url, here))
            parts.append({"type": "image"})
        else:
            raise RequestError(f"{here}: a part's type must be 'text' or 'image_url', got {kind!r}")
    return parts


def prepare(messages: object, processor) -> Prepared:
    """Check ``messages`` and turn them into the processor's inputs, generation prompt included."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {role, content} objects")
    images: list = []
    shaped = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise RequestError(f"messages[{i}]: needs a role of system, user or assistant")
        content = _content(message.get("content"), f"messages[{i}]", images)
        if message["role"] != "user" and isinstance(content, list) and any(p["type"] == "image" for p in content):
            raise RequestError(f"messages[{i}]: images go in user messages only")
        shaped.append({"role": message["role"], "content": content})
    text = processor.apply_chat_template(shaped, add_generation_prompt=True, tokenize=False)
    try:
        inputs = processor(text=[text], images=images or None, return_tensors="pt")
    except ValueError as exc:  # e.g. Qwen's resize refuses an aspect ratio over 200
        raise RequestError(f"the model's image processor cannot take these images: {str(exc)[:160]}") from None
    return Prepared(inputs=inputs, prompt_tokens=int(inputs["input_ids"].shape[1]), images=len(images))


def missing_processor(path: Path) -> str:
    """What of a processor a vision-language checkpoint dir lacks ("" when nothing): an image processor's config
    (``preprocessor_config.json``, or transformers 5's ``processor_config.json`` holding one) and a tokenizer. Without
    them loading fails deep inside transformers with a message that names neither."""
    lacks = []
    combined = path / "processor_config.json"
    try:
        bundled = combined.is_file() and "image_processor" in json.loads(combined.read_text())
    except (OSError, ValueError):
        bundled = False
    if not (path / "preprocessor_config.json").is_file() and not bundled:
        lacks.append("no image processor (preprocessor_config.json)")
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        lacks.append("no tokenizer (tokenizer.json / tokenizer_config.json)")
    return ", ".join(lacks)


def _prompt_style(path: Path) -> str:
    from trainer.model import checkpoint_prompt_style

    return checkpoint_prompt_style(path)


class VisionPolicy(Policy):
    """A vision-language checkpoint dir on this machine (CPU, or CUDA when there is one), behind the Policy
    interface; serve.py sets ``temperature`` and ``max_new_tokens`` per request as it does for LocalPolicy."""

    name = "local-vision"

    def __init__(self, checkpoint_dir: str | Path, temperature: float = 0.0, max_new_tokens: int = 96,
                 timeout_s: float = 300.0) -> None:
        import torch
        from transformers import AutoModelForImageTextToText

        from trainer.tiny_vlm import load_processor

        path = Path(checkpoint_dir)
        if not (path / "config.json").is_file():
            raise PolicyError(f"no HF checkpoint at {path} (config.json missing)")
        missing = missing_processor(path)
        if missing:
            raise PolicyError(f"the vision-language checkpoint at {path} has no processor: {missing}; save the "
                              f"model's processor beside its weights (processor.save_pretrained(dir))")
        try:
            self.processor = load_processor(path)
            self.model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a bad checkpoint for us
            raise PolicyError(f"could not load the vision-language checkpoint at {path}: {exc}") from exc
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.tokenizer = self.processor.tokenizer
        self.temperature, self.max_new_tokens, self.timeout_s = temperature, max_new_tokens, timeout_s
        self.prompt_style = _prompt_style(path)
        self.model_name = str(path)

    def generate(self, prepared: Prepared, temperature: float | None = None) -> PolicyOutput:
        """The answer to a prepared request; a failure comes back in ``PolicyOutput.error``."""
        import torch

        started = time.perf_counter()
        temperature = self.temperature if temperature is None else temperature
        sample = bool(temperature and temperature > 0)
        try:
            inputs = prepared.inputs.to(self.device)
            # the checkpoint's own sampling settings are overridden (Qwen2.5-VL ships top_k=1, top_p=0.001 and a
            # repetition penalty): greedy is the plain argmax, sampling the plain softmax at ``temperature``
            sampling = {"do_sample": True, "temperature": float(temperature), "top_k": 0, "top_p": 1.0} if sample \
                else {"do_sample": False}
            with torch.no_grad():
                out = self.model.generate(
                    **inputs, **sampling, repetition_penalty=1.0, max_new_tokens=self.max_new_tokens,
                    max_time=self.timeout_s, output_logits=True, return_dict_in_generate=True)
            ids = out.sequences[0, prepared.prompt_tokens:].tolist()
            logits = torch.stack(out.logits)[:len(ids), 0].float()
            chosen = torch.tensor(ids, device=logits.device).unsqueeze(1)
            logprobs = torch.log_softmax(logits, dim=-1).gather(1, chosen).squeeze(1).tolist()
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
        except Exception as exc:  # noqa: BLE001 - generation reports, it does not raise
            return PolicyOutput(text="", model=self.model_name, latency_ms=(time.perf_counter() - started) * 1000,
                                error=f"vision-language generation failed: {type(exc).__name__}: {exc}")
        return PolicyOutput(text=text, token_ids=ids, token_logprobs=[float(x) for x in logprobs],
                            model=self.model_name, latency_ms=(time.perf_counter() - started) * 1000)

    def act(self, messages: list[dict], *, temperature: float | None = None) -> PolicyOutput:
        try:
            prepared = prepare(messages, self.processor)
        except Exception as exc:  # noqa: BLE001 - act() reports, it does not raise
            return PolicyOutput(text="", model=self.model_name, error=str(exc))
        return self.generate(prepared, temperature)
