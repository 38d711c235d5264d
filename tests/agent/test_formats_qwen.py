"""The two Qwen formats, named for what they are (issue 36): ``qwen3-relative`` points on Qwen3-VL's 0-1000 grid,
``qwen25-absolute`` in pixels of the image Qwen2.5-VL's processor resized the screenshot to; ``qwen-relative``, the
first one's old name in stored checkpoints, rows and settings, is read, written and prompted as qwen3-relative."""

from __future__ import annotations

import pytest

from agent import formats
from agent.actions import Action
from agent.prompt import FORMAT_SYSTEM_PROMPTS, render_messages
from agent.rollout import RolloutConfig


def call(x, y) -> str:
    return ('Thought: The OK button.\n<tool_call>\n{"name": "computer_use", "arguments": {"action": "left_click", '
            f'"coordinate": [{x}, {y}]}}}}\n</tool_call>')


@pytest.mark.parametrize("width, height, point, screen", [
    (1280, 800, (644, 406), (640, 400)),  # seen as 1288x812
    (160, 210, (84, 112), (80, 105)),  # seen as 168x224 at Qwen2.5-VL's min_pixels 3,136
])
def test_qwen25_absolute_reads_pixels_of_the_resized_screenshot(width, height, point, screen):
    turn = formats.parse(call(*point), format="qwen25-absolute", width=width, height=height)
    assert turn.action == Action("click", {"x": screen[0], "y": screen[1]}) and turn.thought == "The OK button."
    assert formats.render("The OK button.", turn.action, format="qwen25-absolute", width=width, height=height) == \
        call(*point)


def test_qwen25_absolute_takes_the_served_processors_limits():
    """A processor with a larger minimum shows a 160x210 screen larger: its (84, 112) is further up and left."""
    big = {"min_pixels": 78_400, "max_pixels": 12_845_056}  # 252x336
    turn = formats.parse(call(126, 168), format="qwen25-absolute", width=160, height=210, **big)
    assert turn.action == Action("click", {"x": 80, "y": 105})
    default = formats.parse(call(126, 168), format="qwen25-absolute", width=160, height=210).action
    assert default == Action("click", {"x": 120, "y": 158})  # the same answer on the default 168x224 grid
    bad = formats.parse(call(84, 112), format="qwen25-absolute", width=160, height=210, min_pixels=0)
    assert bad.void_reason == "min_pixels must be a positive whole number of pixels, got 0"


def test_qwen3_relative_is_the_0_1000_grid_and_its_old_name_the_same_format():
    for name in ("qwen3-relative", "qwen-relative"):
        turn = formats.parse(call(500, 500), format=name, width=160, height=210)
        assert turn.action == Action("click", {"x": 80, "y": 105})
        assert formats.render("The OK button.", turn.action, format=name, width=160, height=210) == call(500, 500)
        assert formats.check_format(name) == name and formats.canonical(name) == "qwen3-relative"
    assert FORMAT_SYSTEM_PROMPTS["qwen-relative"] == FORMAT_SYSTEM_PROMPTS["qwen3-relative"]
    assert "0-1000 grid" in FORMAT_SYSTEM_PROMPTS["qwen3-relative"]
    qwen25 = FORMAT_SYSTEM_PROMPTS["qwen25-absolute"]
    assert "0-1000" not in qwen25 and "pixels of the screenshot as you see it" in qwen25


def test_the_two_qwens_place_the_same_answer_apart():
    """What the old docs had wrong: Qwen2.5-VL's (84, 112) read on the 0-1000 grid is 13x24, not the OK button."""
    absolute = formats.parse(call(84, 112), format="qwen25-absolute", width=160, height=210).action
    relative = formats.parse(call(84, 112), format="qwen3-relative", width=160, height=210).action
    assert absolute == Action("click", {"x": 80, "y": 105}) and relative == Action("click", {"x": 13, "y": 24})


def test_every_format_name_prompts_and_rolls_out():
    for name in formats.FORMATS:
        RolloutConfig(max_steps=1, action_format=name)
        messages = render_messages(instruction="Click OK.", observation_text="Click OK.", history=[],
                                   action_format=name)
        assert messages[0]["content"] == FORMAT_SYSTEM_PROMPTS[name]
    with pytest.raises(ValueError, match="unknown answer format 'qwen2.5'"):
        formats.check_format("qwen2.5")
