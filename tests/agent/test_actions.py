"""The action grammar: canonical text, strict parsing with useful messages, lenient turns."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.actions import (
    ACTION_NAMES,
    DIRECTIONS,
    Action,
    ActionSyntaxError,
    Turn,
    format_turn,
    parse_action,
    parse_turn,
)

coord = st.integers(min_value=-99999, max_value=99999)
text = st.text(min_size=1, max_size=40)
keys = st.lists(st.sampled_from(["ctrl", "shift", "alt", "a", "enter", "tab", "Meta"]), min_size=1, max_size=3)
pointer = st.sampled_from(["click", "double_click", "right_click"])

actions = st.one_of(
    st.builds(lambda n, x, y: Action(n, {"x": x, "y": y}), pointer, coord, coord),
    st.builds(lambda a, b, c, d: Action("drag", {"x1": a, "y1": b, "x2": c, "y2": d}), coord, coord, coord, coord),
    st.builds(lambda t: Action("type", {"text": t}), text),
    st.builds(lambda k: Action("hotkey", {"keys": "+".join(k)}), keys),
    st.builds(lambda x, y, d: Action("scroll", {"x": x, "y": y, "direction": d}), coord, coord,
              st.sampled_from(DIRECTIONS)),
    st.just(Action("wait", {})),
    st.builds(lambda t: Action("finished", {"answer": t}), st.text(max_size=40)),
    st.builds(lambda t: Action("call_user", {"question": t}), text),
    st.builds(lambda t: Action("shell", {"command": t}), text),
)


def test_canonical_text_of_click_and_quoted_type():
    assert Action("click", {"x": 120, "y": 48}).to_text() == "click(x=120, y=48)"
    assert Action("type", {"text": 'hi "x"'}).to_text() == 'type(text="hi \\"x\\"")'
    assert Action("type", {"text": "a\\b\nc"}).to_text() == 'type(text="a\\\\b\\nc")'
    assert Action("wait", {}).to_text() == "wait()"


def test_defaults_are_filled_for_scroll_and_finished():
    assert parse_action("scroll(x=1, y=2)").args == {"x": 1, "y": 2, "direction": "down"}
    assert parse_action("finished()") == Action("finished", {"answer": ""})


def test_parse_action_accepts_spacing_positional_args_and_action_prefix():
    assert parse_action("  Action: click( 3 ,y = 4 ) ") == Action("click", {"x": 3, "y": 4})
    assert parse_action("drag(1, 2, x2=3, y2=-4)").args == {"x1": 1, "y1": 2, "x2": 3, "y2": -4}


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("click(x=3)", "click needs x and y, got only x"),
        ("click()", "click needs x and y"),
        ("press(x=1)", "unknown action 'press'"),
        ("click(x=1, y=2, z=3)", "unexpected z"),
        ("click(x=1.5, y=2)", "whole pixels"),
        ('click(x="1", y=2)', "x must be an integer"),
        ('scroll(x=1, y=2, direction="sideways")', "direction must be one of"),
        ('type(text="unterminated)', "closing double quote"),
        ('type(text="bad \\q")', "unknown escape"),
        ('type(text="")', "type needs some text"),
        ('hotkey(keys="ctrl+")', "hotkey: keys"),
        ("click(x=1, y=2) extra", "unexpected text after the action"),
        ("click(x=1, x=2)", "given twice"),
        ("click(x=1, 2)", "positional argument cannot follow"),
        ("wait(1)", "at most 0 arguments"),
        ("click(x=12345678, y=1)", "out of range"),
        ("", "empty"),
    ],
)
def test_parse_action_rejects_with_actionable_message(bad, fragment):
    with pytest.raises(ActionSyntaxError) as info:
        parse_action(bad)
    assert fragment in str(info.value)


def test_action_constructor_and_from_dict_validate():
    with pytest.raises(ActionSyntaxError, match="needs x and y"):
        Action("click", {"x": 1})
    with pytest.raises(ActionSyntaxError, match="integer"):
        Action.from_dict({"name": "click", "args": {"x": True, "y": 2}})
    with pytest.raises(ActionSyntaxError, match='needs "name"'):
        Action.from_dict({"args": {}})


def test_action_names_cover_the_grammar():
    assert set(ACTION_NAMES) == {
        "click", "double_click", "right_click", "drag", "type", "hotkey", "scroll", "wait", "finished", "call_user",
        "shell",
    }


@given(actions)
def test_action_text_and_dict_round_trip(action):
    assert parse_action(action.to_text()) == action
    assert Action.from_dict(action.to_dict()) == action
    assert "\n" not in action.to_text()


@settings(max_examples=300)
@given(st.text(max_size=200), actions)
def test_turn_round_trip_gives_back_thought_and_action(thought, action):
    turn = parse_turn(format_turn(thought, action))
    assert not turn.is_void, turn.void_reason
    assert turn.action == action
    assert turn.thought == thought.strip()
    assert turn.to_text() == format_turn(thought, action)


@settings(max_examples=500)
@given(st.text(max_size=300))
def test_parse_turn_never_raises_on_arbitrary_text(raw):
    turn = parse_turn(raw)
    assert isinstance(turn, Turn)
    assert (turn.action is None) == (turn.void_reason is not None)
    assert turn.raw == raw


@given(st.text(alphabet='Action:click(x=1, y=2)"\\\n Thought', max_size=120))
def test_parse_turn_never_raises_on_grammar_like_noise(raw):
    turn = parse_turn(raw)
    assert turn.is_void == (turn.action is None)


def test_parse_turn_without_action_line_is_void_with_reason():
    turn = parse_turn("Thought: I will click OK")
    assert turn.is_void and turn.void_reason == "no 'Action:' line found"
    assert turn.thought == "I will click OK"
    assert turn.to_text() == "Thought: I will click OK"


def test_parse_turn_with_bad_action_is_void_and_keeps_thought():
    turn = parse_turn("Thought: go\nAction: click(x=5)")
    assert turn.is_void and "click needs x and y, got only x" in turn.void_reason
    assert turn.thought == "go"


def test_parse_turn_uses_the_last_action_line():
    turn = parse_turn("Thought: earlier I planned\nAction: wait()\nthen changed my mind\nAction: click(x=1, y=2)")
    assert turn.action == Action("click", {"x": 1, "y": 2})
    assert "Action: wait()" in turn.thought


def test_parse_turn_non_string_is_void():
    turn = parse_turn(None)  # type: ignore[arg-type]
    assert turn.is_void and "must be text" in turn.void_reason


@given(st.text(max_size=120))
def test_parse_action_raises_only_action_syntax_errors(raw):
    try:
        action = parse_action(raw)
    except ActionSyntaxError:
        return
    assert parse_action(action.to_text()) == action
