"""The one prompt renderer: layout, history window, images, feedback."""

from __future__ import annotations

import base64

from agent.actions import ACTION_NAMES, Action, format_turn
from agent.envs.base import Element, Observation
from agent.prompt import SYSTEM_PROMPT, render_messages, render_observation


def _obs(url="http://127.0.0.1:40123/miniwob/click-button.html"):
    return Observation(
        instruction='Click on the "ok" button.', url=url, screenshot=b"\xff\xd8jpeg", width=160, height=210,
        elements=[Element("button", "ok", 30, 100, 20, 12), Element("checkbox", "a", 10, 60, 8, 8, checked=True)],
    )


def _step(i: int) -> tuple[str, str]:
    return (f"screen {i}", format_turn(f"thought {i}", Action("click", {"x": i, "y": i})))


def test_system_prompt_documents_every_action():
    assert all(f"{name}(" in SYSTEM_PROMPT for name in ACTION_NAMES)


def test_render_observation_has_instruction_loopback_path_and_elements():
    text = render_observation(_obs())
    assert text.splitlines() == [
        'Instruction: Click on the "ok" button.',
        "URL: /miniwob/click-button.html",
        '[button] "ok" at (30, 100)',
        '[checkbox] "a" at (10, 60) checked',
    ]
    assert "URL: https://example.org/x" in render_observation(_obs("https://example.org/x"))


def test_first_turn_is_system_then_one_user_string():
    obs_text = render_observation(_obs())
    messages = render_messages(instruction=_obs().instruction, observation_text=obs_text, history=[])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == obs_text  # the instruction is already in the observation text
    assert all(isinstance(m["content"], str) for m in messages)


def test_instruction_is_added_once_when_the_observation_lacks_it():
    messages = render_messages(instruction="Do X.", observation_text="screen 2", history=[_step(1)])
    assert messages[1]["content"] == "Instruction: Do X.\nscreen 1"
    assert messages[3]["content"] == "screen 2"
    assert sum("Instruction: Do X." in m["content"] for m in messages) == 1


def test_rendered_observations_state_the_instruction_only_once():
    obs_text = render_observation(_obs())
    history = [(obs_text, format_turn("a", Action("wait", {}))), (obs_text, format_turn("b", Action("wait", {})))]
    messages = render_messages(instruction=_obs().instruction, observation_text=obs_text, history=history)
    assert sum(m["content"].count("Instruction:") for m in messages) == 1
    assert messages[1]["content"] == obs_text
    assert messages[3]["content"] == messages[5]["content"] == obs_text.split("\n", 1)[1]


def test_history_window_keeps_recent_steps_in_full_and_summarises_older_ones():
    history = [_step(i) for i in range(1, 7)]
    messages = render_messages(instruction="Do X.", observation_text="screen 7", history=history, history_window=2)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"] == (
        "Instruction: Do X.\nEarlier actions: click(x=1, y=1); click(x=2, y=2); click(x=3, y=3); "
        "click(x=4, y=4)\nscreen 5"
    )
    assert messages[2]["content"] == history[4][1] and messages[4]["content"] == history[5][1]
    assert messages[-1]["content"] == "screen 7"


def test_window_zero_puts_the_summary_in_the_last_message_and_marks_void_turns():
    history = [_step(1), ("screen 2", "Thought: hmm\nAction: jump()")]
    messages = render_messages(instruction="Do X.", observation_text="screen 3", history=history, history_window=0)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"] == "Instruction: Do X.\nEarlier actions: click(x=1, y=1); (void turn)\nscreen 3"


def test_feedback_is_appended_to_the_last_user_message():
    messages = render_messages(
        instruction="Do X.", observation_text="screen 2", history=[_step(1)],
        feedback="Your previous proposal click(x=3, y=4) was rejected\nby the annotator.",
    )
    assert messages[-1]["content"] == (
        "screen 2\nFeedback: Your previous proposal click(x=3, y=4) was rejected by the annotator."
    )


def test_image_goes_as_data_url_part_of_the_last_user_message_only():
    jpeg = b"\xff\xd8\xff\xe0fake"
    messages = render_messages(instruction="Do X.", observation_text="screen 2", history=[_step(1)], image=jpeg)
    last = messages[-1]["content"]
    assert isinstance(last, list) and last[0] == {"type": "text", "text": "screen 2"}
    url = last[1]["image_url"]["url"]
    assert last[1]["type"] == "image_url" and url.startswith("data:image/jpeg;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == jpeg
    assert all(isinstance(m["content"], str) for m in messages[:-1])
