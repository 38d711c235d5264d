"""Direct preference optimization on prompt / chosen / rejected rows, through TRL's DPOTrainer
(trainer/trl_trainers.py) for every model.

The reference is the init checkpoint, frozen (with LoRA: the adapter disabled). The chosen completion is the
person's correction, the rejected one the model's proposal it replaced. Logged: loss, the implicit-reward margin
(chosen minus rejected, what DPO pushes up) and the accuracy (share of pairs with margin > 0).
"""

from __future__ import annotations

import logging

from trainer import data as D
from trainer.configs import DPOConfig
from trainer.model import TrainerError, chat_ids, load_tokenizer, run_style
from trainer.vlm import read_dpo_rows

log = logging.getLogger("trainer")


def _plain(messages: list[dict]) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def text_pairs(config: DPOConfig, tokenizer, style: str) -> tuple[list[dict], list[int]]:
    """The pairs of ``config.data`` as TRL's conversational preference rows (prompt in ``style``, ``row``: the line
    number), and each pair's tokens: its prompt and both completions (the batches are sized by them)."""
    pairs = D.read_dpo(config.data, init=config.init, action_format=config.action_format)
    prompts, restyled = D.restyle([pair.prompt for pair in pairs], style)
    if restyled:
        log.info("dpo: %d of %d prompts re-rendered in the %s prompt style", restyled, len(pairs), style)
    rows, lengths = [], []
    for prompt, pair in zip(prompts, pairs):
        rows.append({"prompt": _plain(prompt), "chosen": _plain(pair.chosen), "rejected": _plain(pair.rejected),
                     "row": D.line_of(pair.prompt)})
        completions = sum(len(tokenizer(D._completion_text(c), add_special_tokens=False)["input_ids"])
                          for c in (pair.chosen, pair.rejected))
        lengths.append(2 * len(chat_ids(tokenizer, prompt, add_generation_prompt=True)) + completions)
    return rows, lengths


def train_dpo(config: DPOConfig) -> dict:
    """Train ``config.init`` on the pairs in ``config.data``; save to ``config.out``. Returns metrics."""
    if not config.out:
        raise TrainerError("--out is required: the dir to write the checkpoint to")
    vision = config.reads_images
    style = run_style(config)
    if vision:
        rows = read_dpo_rows(config.data, style, D.init_action_format(config.init, config.action_format))
        lengths = None
    else:
        rows, lengths = text_pairs(config, load_tokenizer(config.init), style)
    from trainer import trl_trainers as T  # see sft.py: the heavy imports after the rows are read

    return T.train_dpo(config, rows, style, vision, lengths)


__all__ = ["text_pairs", "train_dpo"]
