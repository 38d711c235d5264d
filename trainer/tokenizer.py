"""The tiny model's tokenizer: bytes, plus whole words and numbers learned from demonstrations.

Every text round-trips: the base alphabet is the 256 bytes (GPT-2's printable stand-ins), so an
unseen word or any unicode falls back to byte tokens. On top of it sit BPE merges that the repo
ships in ``trainer/tiny_merges.txt`` (made by :func:`learn_merges` from cold-start demonstrations,
``python -m trainer tokenizer``). Merges never cross a word/number boundary: the text is first cut
into letter runs, digit runs and the spans between them, so ``Submit`` is one and the same token in
``Click on the "Submit" button`` and in ``[button] "Submit" x=53, y=90``, and ``53`` is one token.
That is what lets a tiny model find the element the instruction names and copy its coordinates:
one-token keys and values, where byte tokens made it match multi-byte strings.

``bytes`` (no merges) is the tokenizer of checkpoints made before; a checkpoint carries its own
tokenizer files, so those still load and serve unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from trainer.errors import TrainerError

SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>"]
# One turn is <|role|>content<|end|>; generation stops at <|end|>, the tokenizer's eos.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MERGES_PATH = Path(__file__).with_name("tiny_merges.txt")
# Letter runs and digit runs are pieces of their own; what lies between them is a piece too.
PIECES = r"\p{L}+|\p{N}+"
KINDS = ("words", "bytes")


def byte_symbols() -> list[str]:
    """The 256 printable stand-ins ByteLevel uses for bytes 0..255, in byte order."""
    # Same mapping as GPT-2's bytes_to_unicode: printable bytes map to themselves.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    codepoints = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codepoints.append(256 + extra)
            extra += 1
    by_byte = dict(zip(printable, codepoints))
    return [chr(by_byte[b]) for b in range(256)]


def _pre_tokenizer(split_words: bool):
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if not split_words:
        return byte_level
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PIECES), behavior="isolated"), byte_level])


def read_merges(path: str | Path = MERGES_PATH) -> list[tuple[str, str]]:
    """The merges of a merges file: one ``left right`` pair a line, in byte-level symbols."""
    merges = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{path}:{number}: expected 'left right', got {line!r}")
        merges.append((parts[0], parts[1]))
    return merges


def build_tokenizer(kind: str = "words", merges: list[tuple[str, str]] | None = None):
    """The tiny model's tokenizer as a ``PreTrainedTokenizerFast``.

    ``kind`` ``words``: bytes plus the shipped merges (or ``merges``); ``bytes``: bytes only.
    The vocabulary is fixed by construction: special tokens, the 256 bytes, then one token per
    merge in merge order.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of: {', '.join(KINDS)}")
    if kind == "bytes":
        merges = []
    elif merges is None:
        merges = read_merges()
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for symbol in byte_symbols():
        vocab[symbol] = len(vocab)
    for left, right in merges:
        if left not in vocab or right not in vocab:
            raise ValueError(f"merge {left!r} {right!r} uses a token no earlier merge made")
        vocab.setdefault(left + right, len(vocab))
    backend = Tokenizer(models.BPE(vocab=vocab, merges=list(merges), unk_token="<unk>"))
    backend.pre_tokenizer = _pre_tokenizer(split_words=kind == "words")
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="<|end|>",
        padding_side="left",
        model_max_length=4096,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def learn_merges(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> list[tuple[str, str]]:
    """BPE merges learned from ``texts`` with the tiny tokenizer's pieces, up to ``vocab_size`` tokens in all."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE(unk_token="<unk>"))
    backend.pre_tokenizer = _pre_tokenizer(split_words=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    merges = json.loads(backend.to_str())["model"]["merges"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else (m[0], m[1]) for m in merges]


def write_merges(merges: list[tuple[str, str]], path: str | Path, source: str) -> None:
    header = f"# BPE merges of the tiny tokenizer (trainer/tokenizer.py), learned from {source}\n"
    Path(path).write_text(header + "".join(f"{left} {right}\n" for left, right in merges), encoding="utf-8")


def texts_of_rows(path: str | Path) -> Iterable[str]:
    """Every message content of a JSONL file of ``messages`` rows (e.g. trainer demos' output)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            for message in json.loads(line).get("messages", []):
                content = message.get("content")
                if isinstance(content, str):
                    yield content
                elif isinstance(content, list):
                    yield from (part.get("text", "") for part in content if isinstance(part, dict))


def learn_tokenizer(config) -> dict:
    """``python -m trainer tokenizer``: learn merges from ``config.data`` and write them to ``config.out``."""
    if not config.data or not Path(config.data).is_file():
        raise TrainerError(f"--data {config.data!r} is not a file of messages rows")
    if config.vocab_size <= len(SPECIAL_TOKENS) + 256:
        raise TrainerError(f"--vocab-size must exceed {len(SPECIAL_TOKENS) + 256} (special tokens and bytes)")
    merges = learn_merges(texts_of_rows(config.data), config.vocab_size, config.min_frequency)
    write_merges(merges, config.out, Path(config.data).name)
    tokenizer = build_tokenizer(merges=merges)
    return {"merges": len(merges), "vocab_size": len(tokenizer)}
