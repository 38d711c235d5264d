"""The one prompt renderer: layout, history window, images, feedback, prompt styles, action formats."""

from __future__ import annotations

import base64

import pytest

from agent import formats
from agent.actions import ACTION_NAMES, Action, Turn, format_turn, parse_turn
from agent.envs.base import Element, Observation
from agent.formats import uitars
from agent.images import image_bytes
from agent.prompt import (FORMAT_SYSTEM_PROMPTS, PROMPT_STYLES, SYSTEM_PROMPT, HistoryStep, prompt_style_of,
                          quoted_names, render_messages, render_observation, restyle_messages,
                          system_prompt)


def _obs(url="http://127.0.0.1:40123/miniwob/click-button.html"):
    return Observation(
        instruction='Click on the "ok" button.', url=url, screenshot=b"\xff\xd8jpeg", width=160, height=210,
        elements=[Element("button", "ok", 30, 100, 20, 12), Element("checkbox", "a", 10, 60, 8, 8, checked=True)],
    )


def _step(i: int) -> tuple[str, str]:
    return (f"screen {i}", format_turn(f"thought {i}", Action("click", {"x": i, "y": i})))


def test_system_prompt_documents_every_action():
    # shell is offered where an env has one (hybrid desktop tasks say so in their observation), not to every model
    assert all(f"{name}(" in SYSTEM_PROMPT for name in ACTION_NAMES if name != "shell")


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


def test_compact_style_renders_a_one_line_system_prompt_and_terse_elements():
    text = render_observation(_obs(), style="compact")
    assert text.splitlines() == [
        'Task: Click on the "ok" button.',
        "URL: /miniwob/click-button.html",
        '[button] "ok" x=30, y=100',
        '[checkbox] "a" x=10, y=60 checked',
    ]
    messages = render_messages(instruction=_obs().instruction, observation_text=text, history=[_step(1)] * 6,
                               style="compact")
    assert messages[0] == {"role": "system", "content": system_prompt("compact")}
    assert len(system_prompt("compact")) < len(SYSTEM_PROMPT) / 5
    assert messages[1]["content"].startswith('Task: Click on the "ok" button.\nBefore: click(x=1, y=1); click(x=1, y=1)\n')
    assert sum(m["content"].count("Task:") for m in messages) == 1


def test_named_style_repeats_the_elements_the_instruction_quotes_before_the_screen():
    obs = _obs()
    obs.elements += [Element("button", "  ok ", 80, 40, 20, 12), Element("link", "ok.", 50, 20, 10, 8)]
    assert render_observation(obs, style="named").splitlines() == [
        'Task: Click on the "ok" button.',
        'Named: [button] "ok" x=30, y=100',  # both elements named "ok": which one is the model's to say
        'Named: [button] "ok" x=80, y=40',
        "URL: /miniwob/click-button.html",
        '[button] "ok" x=30, y=100',
        '[checkbox] "a" x=10, y=60 checked',
        '[button] "ok" x=80, y=40',
        '[link] "ok." x=50, y=20',  # only a whole text is a match
    ]
    unquoted = Observation("Focus into the textbox.", "", b"", 160, 210, obs.elements)
    assert render_observation(unquoted, "named") == render_observation(unquoted, "compact")
    assert render_observation(Observation('Click "x".', "", b"", 160, 210, []), "named") == 'Task: Click "x".\n(no elements)'
    assert quoted_names('Pick "a  b" and " c ", not "".') == {"a b", "c"}


def test_restyle_into_named_makes_the_named_lines_of_every_screen():
    obs = _obs()
    full, named, compact = _messages("full", obs), _messages("named", obs), _messages("compact", obs)
    assert named[-1]["content"].startswith('Named: [button] "ok" x=30, y=100\n')  # a later screen: no Task line
    assert named[1]["content"].splitlines()[:3] == ['Task: Click on the "ok" button.',
                                                   "Before: click(x=1, y=2); click(x=1, y=2); click(x=1, y=2)",
                                                   'Named: [button] "ok" x=30, y=100']
    assert restyle_messages(full, "named") == named
    assert restyle_messages(compact, "named") == named
    assert restyle_messages(named, "full") == full
    assert restyle_messages(named, "compact") == compact


def test_default_style_is_full_and_unknown_styles_are_refused():
    obs_text = render_observation(_obs())
    assert render_messages(instruction=_obs().instruction, observation_text=obs_text, history=[]) == render_messages(
        instruction=_obs().instruction, observation_text=obs_text, history=[], style="full")
    assert render_observation(_obs()) == render_observation(_obs(), "full")
    with pytest.raises(ValueError, match="compact"):
        render_observation(_obs(), style="tiny")


def test_prompt_style_is_told_by_the_system_prompt():
    for style in PROMPT_STYLES:
        assert prompt_style_of(render_messages(instruction="Do X.", observation_text="s", history=[], style=style)) == style
    assert prompt_style_of([{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}]) is None
    assert prompt_style_of([{"role": "user", "content": "u"}]) is None


def _messages(style: str, obs: Observation, **kw) -> list[dict]:
    history = [(render_observation(obs, style), format_turn("t", Action("click", {"x": 1, "y": 2})))] * 5
    return render_messages(instruction=obs.instruction, observation_text=render_observation(obs, style),
                           history=history, history_window=2, feedback="Try again.", style=style, **kw)


def test_restyle_turns_messages_of_one_style_into_exactly_those_of_the_other():
    obs = _obs()
    obs.elements.append(Element("textbox", 'say "hi" at (1, 2)', 70, 140, 40, 12, focused=True))
    full, compact = _messages("full", obs), _messages("compact", obs)
    assert restyle_messages(full, "compact") == compact
    assert restyle_messages(compact, "full") == full
    assert restyle_messages(full, "full") is full
    imaged = _messages("full", obs, image=b"\xff\xd8x")
    assert restyle_messages(imaged, "compact")[-1]["content"][1] == imaged[-1]["content"][1]
    assert restyle_messages(imaged, "compact")[-1]["content"][0]["text"] == compact[-1]["content"]


def test_restyle_leaves_messages_of_no_known_style_alone():
    messages = [{"role": "system", "content": "custom"}, {"role": "user", "content": '[button] "ok" at (1, 2)'}]
    assert restyle_messages(messages, "compact") is messages


# --- action formats and screenshots (policies that read the screen: UI-TARS, Qwen2.5-VL, OpenCUA) ----------
W, H = 160, 210  # a MiniWoB screenshot


def _turn(thought: str, action: str) -> Turn:
    return parse_turn(format_turn(thought, parse_turn(f"Thought: x\nAction: {action}").action))


def _history(*actions: str) -> list[HistoryStep]:
    return [HistoryStep(f"screen {i + 1}", _turn(f"thought {i + 1}", a), W, H) for i, a in enumerate(actions)]


@pytest.mark.parametrize("action_format", formats.FORMATS)
def test_each_format_has_its_system_prompt_and_earlier_turns_written_in_it(action_format):
    history = _history("click(x=80, y=105)", 'type(text="hello")')
    messages = render_messages(instruction="Do X.", observation_text="screen 3", history=history,
                               action_format=action_format)
    assert messages[0] == {"role": "system", "content": FORMAT_SYSTEM_PROMPTS[action_format]}
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    for step, message in zip(history, (messages[2], messages[4])):
        assert message["content"] == formats.render(step.turn.thought, step.turn.action, format=action_format,
                                                    width=W, height=H)
        back = formats.parse(message["content"], format=action_format, width=W, height=H)
        assert back.thought == step.turn.thought
        if action_format == "loupe":  # in pixels, exactly; the other grids come back within a pixel
            assert back.action == step.turn.action
        else:
            assert back.action.name == step.turn.action.name
    assert messages[1]["content"] == "Instruction: Do X.\nscreen 1"  # the user turns as Loupe writes them


def test_format_loupe_with_turns_renders_the_same_messages_as_with_their_text():
    history = _history("click(x=80, y=105)", "wait()")
    as_text = [(step.observation_text, step.turn.to_text()) for step in history]
    for window in (0, 1, 4):
        assert render_messages(instruction="Do X.", observation_text="s", history=history, history_window=window) == \
            render_messages(instruction="Do X.", observation_text="s", history=as_text, history_window=window)
    assert render_messages(instruction="Do X.", observation_text="s", history=as_text)[0]["content"] == SYSTEM_PROMPT


def test_uitars_history_writes_a_persons_correction_on_the_smart_resized_grid_and_void_turns_as_said():
    grid = uitars.grid(W, H)  # UI-TARS sees 160x210 as a larger image (at least 100 patches of 28x28)
    gx, gy = grid.from_pixels(80, 105)
    void = parse_turn("I would click the button")  # an answer the model wrote that did not parse
    history = [HistoryStep("screen 1", _turn("the ok button", "click(x=80, y=105)"), W, H),
               HistoryStep("screen 2", void, W, H)]
    messages = render_messages(instruction="Do X.", observation_text="screen 3", history=history,
                               action_format="uitars")
    assert messages[2]["content"] == (f"Thought: the ok button\nAction: click(start_box='<|box_start|>({gx},{gy})"
                                      "<|box_end|>')")
    assert (grid.units_x, grid.units_y) != (W, H) and (gx, gy) != (80, 105)
    assert messages[4]["content"] == "I would click the button"

    older = render_messages(instruction="Do X.", observation_text="screen 3", history=history, history_window=0,
                            action_format="uitars")
    assert older[1]["content"] == ("Instruction: Do X.\nEarlier actions: click(start_box='<|box_start|>"
                                   f"({gx},{gy})<|box_end|>'); (void turn)\nscreen 3")


def test_images_go_text_first_into_the_user_turns_of_their_steps_widening_the_window():
    history = _history("wait()", "wait()", "wait()", "wait()")
    shots = [b"\xff\xd8two", b"\xff\xd8three", b"\xff\xd8four", b"\xff\xd8now"]
    messages = render_messages(instruction="Do X.", observation_text="screen 5", history=history, history_window=1,
                               images=shots, action_format="uitars")
    users = [m for m in messages if m["role"] == "user"]
    assert len(users) == 4  # steps 2-4 in full although the window is 1: each image needs its turn
    assert users[0]["content"][0] == {"type": "text",
                                      "text": "Instruction: Do X.\nEarlier actions: wait()\nscreen 2"}
    for user, shot, text in zip(users, shots, ("screen 2", "screen 3", "screen 4", "screen 5")):
        text_part, image_part = user["content"]
        assert text_part["type"] == "text" and text_part["text"].endswith(text)
        assert image_part["type"] == "image_url" and image_bytes(image_part["image_url"]["url"]) == shot
    assert all(isinstance(m["content"], str) for m in messages if m["role"] != "user")

    some = render_messages(instruction="Do X.", observation_text="screen 5", history=history, history_window=4,
                           images=[None, b"\xff\xd8four", b"\xff\xd8now"])
    assert [isinstance(m["content"], list) for m in some if m["role"] == "user"] == [False, False, False, True, True]


def test_bad_image_and_format_arguments_are_refused_with_their_reason():
    history = _history("wait()")
    with pytest.raises(ValueError, match="3 images for 2 user turns"):
        render_messages(instruction="x", observation_text="s", history=history, images=[b"a", b"b", b"c"])
    with pytest.raises(ValueError, match="not both"):
        render_messages(instruction="x", observation_text="s", history=history, image=b"a", images=[b"a"])
    with pytest.raises(ValueError, match="unknown answer format 'tars'"):
        render_messages(instruction="x", observation_text="s", history=history, action_format="tars")
    with pytest.raises(ValueError, match="history step 0 has no screenshot size"):
        render_messages(instruction="x", observation_text="s", history=[("screen", "Thought: a\nAction: wait()")],
                        action_format="pyautogui")
