"""Snapshot rows -> tensors.

A snapshot is a JSONL file, one row a line. The trainer reads these kinds (docs/architecture.md, agent/rows.py):

SFT and CT rows (TRL's conversational format; the loss falls on assistant turns only)::

    {"messages": [{"role": "system" | "user" | "assistant", "content": str}, ...],
     "meta": {...},                       # optional, carried along, never trained on
     "images": ["path", ...]}             # optional, by path; the tiny model ignores them

DPO rows (``chosen``: the person's correction, ``rejected``: the model's proposal)::

    {"prompt": [messages...], "chosen": [{"role": "assistant", "content": str}],
     "rejected": [{"role": "assistant", "content": str}]}

RL rows are steps to sample answers to, read by trainer/grpo.py (agent.rows.GRPORow).

Every reader here validates each row through agent.rows (the one
row schema) and raises ``TrainerError`` naming the file and line.

Rows the flywheel writes record what they were rendered for (``rendered_for``: prompt style, action format,
screenshots; agent.rows.RenderedFor) and are trained on as they are. Given the init checkpoint, a reader refuses
rows rendered for another action format than the one it answers in, and :func:`restyle` refuses rows rendered for
another prompt style than the run trains in: the text cannot be re-written, the snapshot is re-frozen for the
checkpoint. *Legacy* rows, without ``rendered_for`` (snapshots frozen before it, hand-written files), keep the old
path: their user turns are converted to the run's style line by line (agent.prompt.restyle_messages).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from agent import formats
from agent import rows as R
from agent.prompt import restyle_messages
from trainer.model import TINY, TrainerError, chat_ids, read_loupe

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


class Conversation(list):
    """A row's messages (a list of ``{"role", "content"}``), with what the row was rendered for (None: a legacy row)
    and where it was read (``file:line``), so :func:`restyle` can use it as it is or refuse it."""

    def __init__(self, messages: list[dict], rendered_for: R.RenderedFor | None = None, where: str = "") -> None:
        super().__init__(messages)
        self.rendered_for = rendered_for
        self.where = where


def line_of(messages) -> int:
    """The line a :class:`Conversation` was read from (0 for messages made elsewhere)."""
    where = getattr(messages, "where", "")
    tail = where.rsplit(":", 1)[-1] if where else ""
    return int(tail) if tail.isdigit() else 0


REFREEZE = "re-freeze the snapshot for this checkpoint"


def init_action_format(init: str | Path, given: str = "") -> str:
    """The action format the ``--init`` checkpoint answers in: ``given`` (``--action-format``: the flywheel's record
    of the checkpoint, which a dir registered by hand may not carry in its loupe.json), else its loupe.json's, loupe
    for tiny and plain HF dirs."""
    if given:
        return given
    if str(init) == TINY:
        return "loupe"
    return read_loupe(init).get("action_format") or "loupe"


def check_rendered_for(rendered_for: R.RenderedFor | None, where: str, *, action_format: str | None = None,
                       style: str | None = None) -> None:
    """TrainerError (one line naming the row) when a row rendered for one model is given to another: another
    action format than ``action_format``, or another prompt style than ``style`` (None: not checked). Legacy rows
    (``rendered_for`` None) pass. trainer/vlm.py's readers should call it too (with the init's format and style)."""
    if rendered_for is None:
        return
    if action_format is not None and formats.canonical(rendered_for.action_format) != formats.canonical(action_format):
        raise TrainerError(f"{where}: the rows were rendered for {rendered_for.action_format} answers but the init "
                           f"checkpoint answers in {action_format}; {REFREEZE}")
    if style is not None and rendered_for.style != style:
        raise TrainerError(f"{where}: the rows were rendered for the {rendered_for.style} prompt style but this run "
                           f"trains in {style}; {REFREEZE}")


def restyle(conversations: list[list[dict]], style: str) -> tuple[list[list[dict]], int]:
    """Every conversation in prompt ``style`` (agent.prompt); also how many changed. A row that records what it was
    rendered for is used as it is, and refused when rendered for another style (:func:`check_rendered_for`); a
    legacy row is re-rendered line by line."""
    out = []
    for messages in conversations:
        rendered_for = getattr(messages, "rendered_for", None)
        if rendered_for is not None:
            check_rendered_for(rendered_for, getattr(messages, "where", "a row"), style=style)
            out.append(messages)
        else:
            new = restyle_messages(messages, style)
            out.append(new if new is messages else Conversation(new, None, getattr(messages, "where", "")))
    return out, sum(1 for new, old in zip(out, conversations) if new is not old)


def _row(kind: str, row: dict, where: str, action_format: str | None):
    """``row`` read as agent.rows' record of ``kind``, refused when rendered for another action format."""
    try:
        record = R.row_from_dict(kind, row, where)
    except ValueError as exc:
        raise TrainerError(str(exc)) from None
    check_rendered_for(record.rendered_for, where, action_format=action_format)
    return record


def read_sft(path: str | Path, *, init: str | None = None, action_format: str = "") -> list[list[dict]]:
    """The ``messages`` of every SFT / CT row (:class:`Conversation` s); each must hold at least one assistant turn.
    With ``init``, rows rendered for another action format than the init's are refused."""
    action_format = init_action_format(init, action_format) if init is not None else None
    out = []
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        record = _row("sft", row, where, action_format)
        out.append(Conversation(record.messages, record.rendered_for, where))
    return out


def _completion_text(messages: list[dict]) -> str:
    return " ".join(" ".join(str(m.get("content", "")).split()) for m in messages)


def read_dpo(path: str | Path, *, init: str | None = None, action_format: str = "") -> list[R.DPORow]:
    """prompt / chosen / rejected of every DPO row. A row whose chosen and rejected completions are the same
    text prefers nothing (DPO would report it learnt, at accuracy 1.0): it is left out, and said so. With ``init``,
    rows rendered for another action format than the init's are refused."""
    action_format = init_action_format(init, action_format) if init is not None else None
    out, same = [], 0
    for lineno, row in read_jsonl(path):
        where = f"{path}:{lineno}"
        record = _row("dpo", row, where, action_format)
        # agent.rows' record, its prompt knowing what it was rendered for and where it was read (restyle)
        parsed = dataclasses.replace(record, prompt=Conversation(record.prompt, record.rendered_for, where))
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
