"""Demonstration rows: the quoted-target thought (no browser: observations built by hand)."""

import dataclasses

import pytest

from agent.actions import Action, parse_turn
from agent.envs.base import Element, Observation
from trainer.configs import DemosConfig
from trainer.demos import augmented_rows, quoting_target, relabel_words, write_demos
from trainer.model import TrainerError


def _screen(instruction='Click on the link "sed".'):
    return Observation(instruction=instruction, url="http://127.0.0.1:1/miniwob/click-link.html", screenshot=b"",
                       width=160, height=210,
                       elements=[Element("link", "eu", 114, 80, 20, 10), Element("text", "vitae", 132, 80, 30, 10),
                                 Element("link", "sed", 33, 102, 20, 10)])


def test_the_thought_ends_with_the_clicked_elements_line_and_the_action_is_unchanged():
    turn = parse_turn('Thought: I need the link "sed"; I click it.\nAction: click(x=33, y=102)')
    quoted = quoting_target(turn, _screen(), "compact")
    assert quoted.thought == 'I need the link "sed"; I click it. [link] "sed" x=33, y=102'
    again = parse_turn(quoted.raw)
    assert again.action == Action("click", {"x": 33, "y": 102}) and again.thought == quoted.thought


def test_a_click_on_no_element_centre_or_a_non_click_keeps_the_turn():
    off_centre = parse_turn("Thought: somewhere\nAction: click(x=34, y=102)")
    assert quoting_target(off_centre, _screen(), "compact") is off_centre
    typing = parse_turn('Thought: type\nAction: type(text="sed")')
    assert quoting_target(typing, _screen(), "compact") is typing


def test_augmented_rows_quote_the_swapped_target_at_its_new_place():
    rows = augmented_rows("click-link", 7, _screen(), 12, style="compact", quote_target=True)
    assert len(rows) == 12
    for row in rows:
        answer = parse_turn(row["messages"][-1]["content"])
        screen = row["messages"][-2]["content"]
        line = answer.thought[answer.thought.index("[link]"):]
        assert line in screen.splitlines()  # the quoted line is the prompt's own line for that element
        assert line.endswith(f'x={answer.action.args["x"]}, y={answer.action.args["y"]}')
        assert f'"{line.split(chr(34))[1]}"' in screen.splitlines()[0]  # ... of the element the task names


def test_relabelled_variants_name_the_same_element_in_other_words():
    screen = _screen()
    screen = dataclasses.replace(screen, elements=[*screen.elements, Element("text", "sed, eu", 60, 150, 40, 10)])
    rows = augmented_rows("click-link", 7, screen, 40, style="compact", quote_target=True, relabel=1.0)
    assert len(rows) == 40 and all(row["meta"]["relabelled"] for row in rows)
    words = set(relabel_words())
    targets = set()
    for row in rows:
        lines = row["messages"][-2]["content"].splitlines()
        texts = [line.split('"')[1] for line in lines[2:]]
        new_eu, new_vitae, new_sed, phrase = texts
        assert {new_eu, new_vitae, new_sed} <= words and phrase == f"{new_sed}, {new_eu}"  # one word, one swap
        target = lines[0].split('"')[1]
        assert target in (new_eu, new_sed)  # the instruction still names one of the links, in the new words
        answer = parse_turn(row["messages"][-1]["content"])
        clicked = lines[2 + texts.index(target)]
        assert clicked.endswith(f'x={answer.action.args["x"]}, y={answer.action.args["y"]}')
        assert answer.thought.endswith(clicked)
        targets.add(target)
    assert len(targets) > 30  # names drawn afresh, not a handful the model could guess


def test_relabel_zero_keeps_the_words_and_a_share_outside_0_1_is_refused(tmp_path):
    rows = augmented_rows("click-link", 7, _screen(), 12, style="compact", quote_target=True)
    assert not any(row["meta"]["relabelled"] for row in rows)
    assert all('"sed"' in row["messages"][-2]["content"] or '"eu"' in row["messages"][-2]["content"] for row in rows)
    with pytest.raises(TrainerError, match="between 0 and 1"):
        write_demos(DemosConfig(out=str(tmp_path / "d.jsonl"), tasks="click-link", seeds="0-1", relabel=1.5))


def test_rows_in_the_tiny_models_named_style_quote_the_line_the_screen_names():
    rows = augmented_rows("click-link", 7, _screen(), 12, quote_target=True)  # the default style: named
    for row in rows:
        lines = row["messages"][-2]["content"].splitlines()
        named = [line.removeprefix("Named: ") for line in lines if line.startswith("Named: ")]
        answer = parse_turn(row["messages"][-1]["content"])
        line = answer.thought[answer.thought.index("[link]"):]
        assert named == [line] and line in lines  # one Named: line, the element clicked, also in its place
        assert f'"{line.split(chr(34))[1]}"' in lines[0]
