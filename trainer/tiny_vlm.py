"""A tiny Qwen2.5-VL, built offline: the vision-language model the tests and CPU runs train.

:func:`save_tiny_vlm` writes a Qwen2.5-VL checkpoint dir (``Qwen2_5_VLForConditionalGeneration``, randomly
initialised with a fixed seed: text width 64 in 2 layers, a 2-block vision tower of width 32 with Qwen's 14-pixel
patches merged 2x2) and its processor: the PIL/numpy image processor ``Qwen2VLImageProcessorPil``, a byte-level BPE
tokenizer (the tiny model's bytes and merges, ``trainer/tokenizer.py``) holding Qwen's special tokens at the end of
its vocabulary, and the standard Qwen2.5-VL chat template (the copy TRL ships, so TRL recognises it and swaps in its
``{% generation %}`` variant for assistant-only loss).

transformers builds Qwen2.5-VL's processor with a video processor, and its video processors need torchvision, which
this project does not install (PyPI's breaks beside the CPU torch). So :class:`ImageOnlyQwen2_5_VLProcessor` is the
stock processor without the video part, and importing this module registers it for Qwen2.5-VL configs when
torchvision is missing. The saved dir names no processor class: ``AutoProcessor.from_pretrained(dir)`` gives this one
here (once ``trainer.tiny_vlm`` is imported) and the stock ``Qwen2_5_VLProcessor`` where torchvision is installed
(a GPU node, vLLM).
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import torch
from tokenizers import AddedToken, Tokenizer, decoders, models
from transformers import (AutoConfig, AutoProcessor, PreTrainedTokenizerFast, Qwen2_5_VLConfig,
                          Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor)
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.processing_utils import ProcessorMixin
from transformers.utils import is_torchvision_available

from trainer.tokenizer import _pre_tokenizer, byte_symbols, read_merges

# Qwen2's special tokens, in Qwen's order (151643...151656 there; here right after the BPE vocabulary).
QWEN_SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>",
]
# Qwen2.5-VL's chat template as TRL ships it (trl/chat_templates/qwen2_5_vl.jinja, byte for byte the model's).
CHAT_TEMPLATE = (resources.files("trl") / "chat_templates" / "qwen2_5_vl.jinja").read_text(encoding="utf-8")
PROCESSOR_FILES = ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json")

TEXT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=4096, rms_norm_eps=1e-6,
            # multimodal RoPE: the head's 8 frequency pairs split over time, height and width
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]})
VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1])
# The image processor's pixel budget: a 160x210 MiniWoB screen becomes 12x16 patches, 48 image tokens.
MIN_PIXELS, MAX_PIXELS = 56 * 56, 28 * 28 * 256


class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    """Qwen2.5-VL's processor without the video processor (which needs torchvision): images and text only."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        self.image_token = getattr(tokenizer, "image_token", None) or "<|image_pad|>"
        self.video_token = getattr(tokenizer, "video_token", None) or "<|video_pad|>"
        self.image_token_id = tokenizer.convert_tokens_to_ids(self.image_token)
        self.video_token_id = tokenizer.convert_tokens_to_ids(self.video_token)
        ProcessorMixin.__init__(self, image_processor, tokenizer, chat_template=chat_template, **kwargs)


if not is_torchvision_available():
    AutoProcessor.register(Qwen2_5_VLConfig, ImageOnlyQwen2_5_VLProcessor, exist_ok=True)


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The tiny byte-level BPE (trainer/tokenizer.py's bytes and merges) with Qwen's special tokens and template."""
    merges = read_merges()
    vocab = {symbol: index for index, symbol in enumerate(byte_symbols())}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=list(merges)))
    backend.pre_tokenizer = _pre_tokenizer(split_words=True)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        padding_side="right", model_max_length=4096)
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_processor(tokenizer=None) -> ProcessorMixin:
    """The processor of the tiny VLM (image-only where torchvision is missing)."""
    tokenizer = tokenizer or build_tokenizer()
    images = Qwen2VLImageProcessorPil(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS, patch_size=VISION["patch_size"],
                                      merge_size=VISION["spatial_merge_size"],
                                      temporal_patch_size=VISION["temporal_patch_size"])
    return ImageOnlyQwen2_5_VLProcessor(image_processor=images, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)


def tiny_vlm_config(tokenizer) -> Qwen2_5_VLConfig:
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in QWEN_SPECIAL_TOKENS}
    text = dict(TEXT, vocab_size=len(tokenizer), bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"])
    return Qwen2_5_VLConfig(text_config=text, vision_config=dict(VISION), image_token_id=ids["<|image_pad|>"],
                            video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
                            vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=False)


def build_tiny_vlm(seed: int = 0):
    """A freshly initialised tiny Qwen2.5-VL and its processor. Returns (model, processor)."""
    processor = build_processor()
    config = tiny_vlm_config(processor.tokenizer)
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = config.text_config.eos_token_id
    model.generation_config.pad_token_id = config.text_config.pad_token_id
    return model, processor


def load_processor(path: str | os.PathLike) -> ProcessorMixin:
    """The processor of a checkpoint dir: ``AutoProcessor``'s, or for a Qwen2.5-VL dir where torchvision is missing
    the image-only one (also for dirs that name the stock class, as the Hub's do)."""
    if AutoConfig.from_pretrained(path).model_type == Qwen2_5_VLConfig.model_type and (
            not is_torchvision_available() or not (Path(path) / "video_preprocessor_config.json").is_file()):
        # Without torchvision the stock processor cannot load; with it, the stock one insists on a video processor,
        # which a screenshot-only dir (the tiny VLM's) does not have. Seen on a CUDA machine with torchvision.
        return ImageOnlyQwen2_5_VLProcessor.from_pretrained(path)
    return AutoProcessor.from_pretrained(path)


def forget_processor_class(path: str | os.PathLike) -> None:
    """Take the processor class's name out of a saved processor's files, so that each environment loads its own
    (see the module docstring)."""
    for name in PROCESSOR_FILES:
        file = Path(path) / name
        if file.is_file():
            data = json.loads(file.read_text())
            if data.pop("processor_class", None) is not None:
                file.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def save_tiny_vlm(path: str | os.PathLike, seed: int = 0) -> Path:
    """Write an untrained tiny Qwen2.5-VL checkpoint dir (weights, config, processor files) to ``path``."""
    path = Path(path)
    model, processor = build_tiny_vlm(seed)
    model.save_pretrained(path, safe_serialization=True)
    processor.save_pretrained(path)
    forget_processor_class(path)
    return path


__all__ = ["save_tiny_vlm", "build_tiny_vlm", "build_processor", "load_processor", "forget_processor_class",
           "ImageOnlyQwen2_5_VLProcessor"]
