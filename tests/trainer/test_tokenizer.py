"""The tiny tokenizer: every text round-trips, words and numbers are one token wherever they stand."""

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.tokenizer import MERGES_PATH, build_tokenizer, learn_merges, read_merges

WORDS = build_tokenizer()
BYTES = build_tokenizer("bytes")


def _pieces(tokenizer, text: str) -> list[str]:
    return [tokenizer.decode([i]) for i in tokenizer(text, add_special_tokens=False)["input_ids"]]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_any_text_round_trips(text):
    for tokenizer in (WORDS, BYTES):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text


def test_the_word_an_instruction_names_is_the_same_token_in_the_element_line():
    instruction = _pieces(WORDS, 'Task: Click on the "Submit" button.')
    element = _pieces(WORDS, '[button] "Submit" x=53, y=90')
    assert "Submit" in instruction and "Submit" in element
    assert element[-3:] == ["y", "=", "90"]  # a coordinate is one token, copied whole


def test_words_make_prompts_shorter_than_bytes():
    text = 'Task: Click on the link "ipsum".\n[link] "ipsum" x=31, y=120\n[text] "dolor sit amet" x=80, y=60'
    assert len(_pieces(WORDS, text)) * 2 < len(_pieces(BYTES, text))
    assert len(_pieces(BYTES, text)) == len(text.encode())


def test_shipped_merges_fix_the_vocabulary():
    merges = read_merges()
    assert len(merges) > 500
    assert len(WORDS) == 7 + 256 + len(merges)
    assert len(build_tokenizer()) == len(WORDS)  # by construction, the same every time


def test_learned_merges_never_cross_a_word_boundary():
    merges = learn_merges(["alpha beta 123 alpha beta 123"] * 50, vocab_size=7 + 256 + 40)
    tokens = {left + right for left, right in merges}
    assert "alpha" in tokens and "123" in tokens
    # Letters never merge with spaces or digits: each token is letters, digits, or neither.
    for token in tokens:
        kinds = {"letter" if c.isalpha() else "digit" if c.isdigit() else "other" for c in token}
        assert len(kinds) == 1, token


def test_tokenizer_command_writes_merges_a_tokenizer_reads(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f'Click "Submit" x={i}'}]}) + "\n"
                            for i in range(200)))
    out = tmp_path / "merges.txt"
    done = subprocess.run([sys.executable, "-m", "trainer", "tokenizer", "--data", str(rows), "--out", str(out),
                           "--vocab-size", "400"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout.strip().splitlines()[-1])["metrics"]
    tokenizer = build_tokenizer(merges=read_merges(out))
    assert len(tokenizer) == metrics["vocab_size"] <= 400
    assert "Submit" in _pieces(tokenizer, '[button] "Submit"')

    missing = subprocess.run([sys.executable, "-m", "trainer", "tokenizer", "--data", str(tmp_path / "nope.jsonl")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "is not a file" in missing.stderr


def test_a_broken_merges_file_is_refused_with_its_line(tmp_path):
    bad = tmp_path / "merges.txt"
    bad.write_text("# header\na b c\n")
    with pytest.raises(ValueError, match=r"merges.txt:2"):
        read_merges(bad)
    assert MERGES_PATH.is_file()
