"""Snapshot rows -> tensors.

A snapshot is a JSONL file, one row a line. The trainer reads four kinds (DESIGN.md):

SFT and CT rows (TRL's conversational format; the loss falls on assistant turns only)::

    {"messages": [{"role": "system" | "user" | "assistant", "content": str}, ...],
     "meta": {...},                       # optional, carried along, never trained on
     "images": ["path", ...]}             # optional, by path; the tiny model ignores them

DPO rows (``chosen``: the person's correction, ``rejected``: the model's proposal)::

    {"prompt": [messages...], "chosen": [{"role": "assistant", "content": str}],
     "rejected": [{"role": "assistant", "content": str}]}

RL rows (one whole episode; ``group`` ties attempts at the same task and seed for GRPO)::

    {"episode_id": str | int, "task": str, "seed": int, "reward": float, "group": str,
     "steps": [{"prompt": [messages], "output": str, "output_token_ids": [int],
                "old_logprobs": [float], "reward": float, "void": bool}, ...]}

``output_token_ids`` / ``old_logprobs`` are what the acting checkpoint produced; when the ids are
missing or empty they are re-tokenized from ``output`` and old logprobs are recomputed by the
trainer (offline data from another policy). Every reader here validates each row and raises
``TrainerError`` naming the file and line.
"""

from __future__ import annotations

import json
import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

from trainer.model import TrainerError, chat_ids

log = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant")
IGNORE = -100  # label value the loss skips


def read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    """(line number, row) for every non-blank line; a line that is not a JSON object is an error."""
    path = Path(path)
    if not path.is_file():
        raise TrainerError(f"data file {str(path)!r} does not exist")
    rows: list[tuple[int, dict]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrainerError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(row, dict):
                raise TrainerError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
            rows.append((lineno, row))
    if not rows:
        raise TrainerError(f"{path}: no rows (the file is empty)")
    return rows


def _check_messages(messages, where: str, *, assistant_only: bool = False) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise TrainerError(f"{where}: expected a non-empty list of messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TrainerError(f"{where}[{index}]: a message must be an object with role and content")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise TrainerError(f"{where}[{index}]: role must be one of {', '.join(ROLES)}, got {role!r}")
        if assistant_only and role != "assistant":
            raise TrainerError(f"{where}[{index}]: only assistant messages belong here, got {role!r}")
        if not isinstance(content, str):
            raise TrainerError(f"{where}[{index}]: content must be a string, got {type(content).__name__}")
    return messages


def restyle(conversations: list[list[dict]], style: str) -> tuple[list[list[dict]], int]:
    """Every conversation re-rendered in prompt ``style`` (agent.prompt); also how many changed."""
    from agent.prompt import restyle_messages

    out = [restyle_messages(messages, style) for messages in conversations]
    return out, sum(1 for new, old in zip(out, conversations) if new is not old)


def read_sft(path: str | Path) -> list[list[dict]]:
    """The ``messages`` of every SFT / CT row; each must hold at least one assistant turn."""
    out = []
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}: messages"
        if "messages" not in row:
            raise TrainerError(f"{path}:{lineno}: an SFT row needs a 'messages' list (keys found: {sorted(row)})")
        messages = _check_messages(row["messages"], where)
        if not any(m["role"] == "assistant" for m in messages):
            raise TrainerError(f"{where}: no assistant turn, nothing to learn from")
        out.append(messages)
    return out


@dataclass
class DPORow:
    prompt: list[dict]
    chosen: list[dict]
    rejected: list[dict]


def _completion_text(messages: list[dict]) -> str:
    return " ".join(" ".join(str(m.get("content", "")).split()) for m in messages)


def read_dpo(path: str | Path) -> list[DPORow]:
    """prompt / chosen / rejected of every DPO row. A row whose chosen and rejected completions are the same
    text prefers nothing (DPO would report it learnt, at accuracy 1.0): it is left out, and said so."""
    out, same = [], 0
    for lineno, row in read_jsonl(path):
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
        if missing:
            raise TrainerError(f"{path}:{lineno}: a DPO row needs prompt, chosen and rejected; missing {missing}")
        parsed = DPORow(
            prompt=_check_messages(row["prompt"], f"{path}:{lineno}: prompt"),
            chosen=_check_messages(row["chosen"], f"{path}:{lineno}: chosen", assistant_only=True),
            rejected=_check_messages(row["rejected"], f"{path}:{lineno}: rejected", assistant_only=True),
        )
        if _completion_text(parsed.chosen) == _completion_text(parsed.rejected):
            same += 1
            continue
        out.append(parsed)
    if same:
        log.warning("%s: %d DPO row(s) left out: their chosen and rejected completions are the same", path, same)
        if not out:
            raise TrainerError(f"{path}: every DPO row's chosen completion equals its rejected one; "
                               "there is no preference to learn")
    return out


@dataclass
class RLStep:
    prompt: list[dict]
    output: str
    output_token_ids: list[int]
    old_logprobs: list[float]
    reward: float
    void: bool


@dataclass
class RLEpisode:
    episode_id: str
    task: str
    seed: int | None
    reward: float
    group: str
    steps: list[RLStep] = field(default_factory=list)

    @property
    def has_void(self) -> bool:
        return any(step.void for step in self.steps)


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TrainerError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def read_rl(path: str | Path) -> list[RLEpisode]:
    """Whole episodes of an RL snapshot."""
    out = []
    for lineno, row in read_jsonl(path):
        out.append(rl_episode_from_row(row, f"{path}:{lineno}"))
    return out


def rl_episode_from_row(row: dict, where: str) -> RLEpisode:
    """Validate one RL row (also used for episodes collected online)."""
    steps_raw = row.get("steps")
    if not isinstance(steps_raw, list) or not steps_raw:
        raise TrainerError(f"{where}: an RL row needs a non-empty 'steps' list")
    steps = []
    for index, step in enumerate(steps_raw):
        at = f"{where}: steps[{index}]"
        if not isinstance(step, dict):
            raise TrainerError(f"{at}: expected an object")
        if not isinstance(step.get("output"), str):
            raise TrainerError(f"{at}: 'output' must be a string")
        ids = step.get("output_token_ids") or []
        olds = step.get("old_logprobs") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TrainerError(f"{at}: output_token_ids must be a list of ints")
        if not isinstance(olds, list):
            raise TrainerError(f"{at}: old_logprobs must be a list of numbers")
        olds = [_number(v, f"{at}: old_logprobs") for v in olds]
        if olds and len(olds) != len(ids):
            raise TrainerError(f"{at}: {len(ids)} output_token_ids but {len(olds)} old_logprobs")
        steps.append(RLStep(
            prompt=_check_messages(step.get("prompt"), f"{at}: prompt"),
            output=step["output"],
            output_token_ids=list(ids),
            old_logprobs=olds,
            reward=_number(step.get("reward", 0.0), f"{at}: reward"),
            void=bool(step.get("void", False)),
        ))
    reward = _number(row.get("reward", sum(s.reward for s in steps)), f"{where}: reward")
    task = str(row.get("task", ""))
    seed = row.get("seed")
    group = row.get("group") or f"{task}:{seed}"
    return RLEpisode(episode_id=str(row.get("episode_id", where)), task=task, seed=seed,
                     reward=reward, group=str(group), steps=steps)


# ---------------------------------------------------------------------------------------------
# Tokenization


@dataclass
class Example:
    """One token sequence with per-token labels (IGNORE where no loss falls)."""

    input_ids: list[int]
    labels: list[int]

    def __len__(self) -> int:
        return len(self.input_ids)


def _truncate_left(ids: list[int], labels: list[int], max_length: int) -> tuple[list[int], list[int]]:
    # The answer sits at the end, so the start of a long prompt is what goes.
    if len(ids) > max_length:
        return ids[-max_length:], labels[-max_length:]
    return ids, labels


def sft_example(tokenizer, messages: list[dict], max_length: int) -> Example:
    """Token ids of a conversation with labels on assistant turns (content and end token) only.

    Each assistant turn's span is found by rendering the conversation up to it with and without
    the turn, so this works for any chat template that renders prefixes consistently.
    """
    ids: list[int] = []
    labels: list[int] = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prefix = chat_ids(tokenizer, messages[:index], add_generation_prompt=True) if index else \
            chat_ids(tokenizer, [], add_generation_prompt=True)
        upto = chat_ids(tokenizer, messages[: index + 1])
        if upto[: len(prefix)] != prefix:
            raise TrainerError("the chat template does not render prefixes consistently; cannot mask the prompt")
        labels.extend([IGNORE] * (len(prefix) - len(ids)))
        labels.extend(upto[len(prefix):])
        ids = upto
    return Example(*_truncate_left(ids, labels, max_length))


def completion_example(tokenizer, prompt: list[dict], completion: list[dict] | list[int], max_length: int) -> Example:
    """Prompt (+ generation header) followed by a completion, labels on the completion only.

    ``completion`` is a list of assistant messages, or raw token ids (RL: exactly what was sampled).
    """
    prompt_ids = chat_ids(tokenizer, prompt, add_generation_prompt=True)
    if completion and isinstance(completion[0], int):
        completion_ids = list(completion)  # type: ignore[arg-type]
    else:
        full = sft_example(tokenizer, prompt + list(completion), max_length=10**9)  # type: ignore[operator]
        completion_ids = full.input_ids[len(prompt_ids):]
    ids = prompt_ids + completion_ids
    labels = [IGNORE] * len(prompt_ids) + completion_ids
    return Example(*_truncate_left(ids, labels, max_length))


def length_batches(lengths: list[int], batch_tokens: int, rng: random.Random) -> list[list[int]]:
    """Index batches of similar length, each at most ``batch_tokens`` padded tokens, shuffled.

    Sorting by length keeps padding low on CPU, where every padded token costs real time.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], rng.random()))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        longest_if = max(longest, lengths[index])
        if current and longest_if * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest_if = [], lengths[index]
        current.append(index)
        longest = longest_if
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def collate(examples: list[Example], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest: input_ids, attention_mask, labels, all [B, T] long."""
    width = max(len(e) for e in examples)
    input_ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), IGNORE, dtype=torch.long)
    attention = torch.zeros((len(examples), width), dtype=torch.long)
    for row, example in enumerate(examples):
        n = len(example)
        input_ids[row, :n] = torch.tensor(example.input_ids)
        labels[row, :n] = torch.tensor(example.labels)
        attention[row, :n] = 1
    return {"input_ids": input_ids, "attention_mask": attention, "labels": labels}


def token_logprobs(model, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of every label token under ``model``.

    batch: collate() output on the model's device. Returns (logp [B, T-1], mask [B, T-1]) aligned
    so that logp[:, t] is the log-probability of labels[:, t + 1] given the tokens up to t.
    """
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    targets = batch["labels"][:, 1:]
    mask = targets != IGNORE
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    return logp * mask, mask
