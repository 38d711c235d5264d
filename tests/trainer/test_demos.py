"""Demonstration rows: the quoted-target thought (no browser: observations built by hand)."""

from agent.actions import Action, parse_turn
from agent.envs.base import Element, Observation
from trainer.demos import augmented_rows, quoting_target


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
