"""Supervised fine-tuning on multi-turn ``messages`` rows, loss on the assistant turns only, through TRL's
SFTTrainer (trainer/trl_trainers.py) for every model: a text model's rows are tokenized here (data.sft_example), a
vision-language model's are read with their screenshots (trainer/vlm.py).

With ``--val-data`` (held-out rows, e.g. a flywheel cycle's split of its new rows) every progress line also
carries ``val_loss``, and the checkpoint keeps the weights of the line where it was lowest: a few rows trained
too long are memorised, and the validation loss is what shows it. ``--patience`` stops the run there.
"""

from __future__ import annotations

import logging

from trainer import data as D
from trainer.configs import SFTConfig
from trainer.model import TrainerError, load_tokenizer, run_style
from trainer.vlm import read_sft_rows

log = logging.getLogger("trainer")


def text_rows(path: str, tokenizer, style: str, config: SFTConfig) -> list[dict]:
    """The SFT rows of ``path`` in prompt ``style``, tokenized: ``input_ids``, ``labels`` (-100 off the assistant
    turns) and ``row`` (the line number)."""
    conversations = D.read_sft(path, init=config.init, action_format=config.action_format)
    conversations, restyled = D.restyle(conversations, style)
    if restyled:
        log.info("sft: %d of %d rows re-rendered in the %s prompt style (%s)", restyled, len(conversations), style,
                 path)
    rows = []
    for messages in conversations:
        example = D.sft_example(tokenizer, messages, config.max_length)
        rows.append({"input_ids": example.input_ids, "labels": example.labels, "row": D.line_of(messages)})
    return rows


def train_sft(config: SFTConfig) -> dict:
    """Train on ``config.data`` from ``config.init`` and save to ``config.out``. Returns the metrics."""
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    if config.patience and not config.val_data:
        raise TrainerError("--patience stops on the validation loss: give --val-data too")
    vision = config.reads_images
    style = run_style(config)
    if vision:
        action_format = D.init_action_format(config.init, config.action_format)
        rows = read_sft_rows(config.data, style, action_format)
        val = read_sft_rows(config.val_data, style, action_format) if config.val_data else None
    else:
        tokenizer = load_tokenizer(config.init)
        rows = text_rows(config.data, tokenizer, style, config)
        val = text_rows(config.val_data, tokenizer, style, config) if config.val_data else None
        trained = sum(sum(1 for t in r["labels"] if t != D.IGNORE) for r in rows)
        log.info("sft: %d rows, %d tokens (%d trained on)", len(rows), sum(len(r["input_ids"]) for r in rows), trained)
    # trl, datasets and peft take seconds to import: rows that cannot be read are said before
    from trainer import trl_trainers as T

    return T.train_sft(config, rows, style, vision, val)


__all__ = ["text_rows", "train_sft"]
