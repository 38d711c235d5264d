"""What keeps redaction off a snapshot build's clock (issue 38): libphonenumber's matcher runs only on texts with
seven digits or more close together, and a text repeated in a build's rows is redacted once."""
import phonenumbers
import pytest

from core import redaction


def test_phone_numbers_written_with_separators_are_still_found():
    found = redaction.hits("Call (415) 555-2671, or +44 20 7946 0958 from abroad; ext. 12 after 5.")
    assert [h.value for h in found if h.kind == "phone"] == ["(415) 555-2671", "+44 20 7946 0958"]


def test_coordinates_and_short_numbers_never_reach_the_phone_matcher(monkeypatch):
    def matcher(*args, **kwargs):
        raise AssertionError("the matcher ran")

    monkeypatch.setattr(phonenumbers, "PhoneNumberMatcher", matcher)
    text = 'Thought: the OK button of 1234 at 19\nAction: click(x=80, y=100) [1,2,3] "Item 5-1-0" at (10, 40)'
    assert [h for h in redaction.hits(text) if h.kind == "phone"] == []


def test_a_text_repeated_in_a_builds_rows_is_redacted_once(monkeypatch):
    calls = []
    original = redaction.text_redact
    monkeypatch.setattr(redaction, "text_redact", lambda text, policy: calls.append(text) or original(text, policy))
    redaction._text_redact_remembered.cache_clear()
    turn = "Thought: mail ada@example.com\nAction: click(x=1, y=2)"
    rows = [{"messages": [{"role": "assistant", "content": turn}] * n} for n in range(1, 4)]
    redacted = redaction.value_redact(rows)
    assert sorted(calls) == sorted([turn, "assistant"])  # each once, though the turn stands in six places
    assert redacted[2]["messages"][2]["content"] == "Thought: mail [EMAIL]\nAction: click(x=1, y=2)"
    redaction._text_redact_remembered.cache_clear()
