"""The one row schema (agent/rows.py): records that validate, and prompts rendered from structured steps."""

import pytest

from agent import formats
from agent.actions import Action, format_turn
from agent.envs.base import Element
from agent.prompt import FORMAT_SYSTEM_PROMPTS, render_messages, render_observation
from agent.rows import DPORow, GRPORow, RenderedFor, SFTRow, StepView, render_prompt, render_turn, row_from_dict

UITARS = RenderedFor(style="full", action_format="uitars", reads_images=True, history_images=1)


def _view(n: int, screenshot: str | None = None) -> StepView:
    return StepView(instruction='Click on the "ok" button.', url="http://127.0.0.1:9/click.html",
                    elements=[Element("button", "ok", 30 + n, 100, 20, 12)], width=160, height=210,
                    screenshot=f"images/s{n}.jpg" if screenshot is None else screenshot, thought=f"step {n}",
                    action=Action("click", {"x": 30 + n, "y": 100}))


def _sft(**changes) -> dict:
    row = SFTRow(messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "Task: go"},
                           {"role": "assistant", "content": "Thought: ok\nAction: wait()"}],
                 images=["images/a.jpg"], meta={"episode_id": 3}, rendered_for=UITARS).to_dict()
    return {**row, **changes}


def test_rows_round_trip_through_their_dicts():
    sft = _sft()
    assert SFTRow.from_dict(sft, "row 1").to_dict() == sft
    dpo = DPORow(prompt=sft["messages"][:2], chosen=sft["messages"][2:], rejected=[{"role": "assistant", "content": "x"}],
                 images=["images/a.jpg"], rendered_for=RenderedFor()).to_dict()
    assert row_from_dict("dpo", dpo, "row 2").to_dict() == dpo
    assert "rendered_for" not in SFTRow.from_dict({k: v for k, v in sft.items() if k != "rendered_for"}, "r").to_dict()


@pytest.mark.parametrize("row, message", [
    ("not an object", "data.jsonl:4: expected a JSON object, got str"),
    ({"prompt": []}, "data.jsonl:4: an SFT row needs a 'messages' list (keys found: ['prompt'])"),
    (_sft(messages=[{"role": "robot", "content": "x"}]), "data.jsonl:4: messages[0]: role must be one of"),
    (_sft(messages=[{"role": "user", "content": ["part"]}]), "data.jsonl:4: messages[0]: content must be a string"),
    (_sft(messages=[{"role": "user", "content": "x"}]), "data.jsonl:4: messages: no assistant turn"),
    (_sft(images=["a.jpg", "b.jpg"]), "data.jsonl:4: 2 images but 1 user turns"),
    (_sft(images="a.jpg"), "data.jsonl:4: images must be a list of paths"),
    (_sft(meta=[1]), "data.jsonl:4: meta must be an object"),
    (_sft(rendered_for={"action_format": "klingon"}), "data.jsonl:4: rendered_for: unknown answer format 'klingon'"),
    (_sft(rendered_for={"style": "baroque"}), "data.jsonl:4: rendered_for: unknown prompt style 'baroque'"),
    (_sft(rendered_for={"history_images": -1}), "data.jsonl:4: rendered_for: history_images must be a whole number"),
    (_sft(rendered_for={"colour": "red"}), "data.jsonl:4: rendered_for: unknown keys ['colour']"),
])
def test_a_malformed_sft_row_is_refused_with_a_message_naming_the_row(row, message):
    with pytest.raises(ValueError) as caught:
        SFTRow.from_dict(row, "data.jsonl:4")
    assert str(caught.value).startswith(message), str(caught.value)


def test_malformed_dpo_and_rl_rows_are_refused_naming_the_row():
    with pytest.raises(ValueError, match=r"^row 2: a DPO row needs prompt, chosen and rejected; missing \['rejected'\]"):
        DPORow.from_dict({"prompt": [], "chosen": []}, "row 2")
    user = [{"role": "user", "content": "x"}]
    with pytest.raises(ValueError, match=r"^row 2: chosen\[0\]: only assistant messages belong here"):
        DPORow.from_dict({"prompt": user, "chosen": user, "rejected": user}, "row 2")
    with pytest.raises(ValueError, match=r"^row 5: an RL row needs a 'messages' prompt \(keys found: \['steps'\]\)"):
        row_from_dict("rl", {"steps": []}, "row 5")  # a whole-episode row, as RL rows were before GRPO
    with pytest.raises(ValueError, match=r"^row 6: unknown row kind 'xyz'"):
        row_from_dict("xyz", {}, "row 6")


def test_a_loupe_text_target_renders_exactly_what_the_rollout_rendered():
    history, step = [_view(0), _view(1)], _view(2)
    messages, images = render_prompt(step, history, RenderedFor(style="named"))
    expected = render_messages(
        instruction=step.instruction, observation_text=render_observation(step.observation(), "named"),
        history=[(render_observation(v.observation(), "named"), format_turn(v.thought, v.action)) for v in history],
        style="named")
    assert messages == expected and images == []
    assert render_turn("step 2", step.action, RenderedFor(), 160, 210) == format_turn("step 2", step.action)
    assert render_turn("", None, RenderedFor(), 160, 210, raw="gibberish") == "gibberish"  # a void turn as written


def test_a_reading_target_gets_the_current_and_history_images_earlier_screenshots_in_its_format():
    history, step = [_view(0), _view(1)], _view(2)
    messages, images = render_prompt(step, history, UITARS)
    assert images == ["images/s1.jpg", "images/s2.jpg"]  # the last two user turns
    assert messages[0]["content"] == FORMAT_SYSTEM_PROMPTS["uitars"]
    assert all(isinstance(m["content"], str) for m in messages)  # images travel by path, not in the messages
    answers = [m["content"] for m in messages if m["role"] == "assistant"]
    for answer, view in zip(answers, history, strict=True):
        turn = formats.parse(answer, format="uitars", width=160, height=210)
        assert turn.action is not None and turn.action.name == "click", answer
        assert abs(turn.action.args["x"] - view.action.args["x"]) <= 1 and abs(turn.action.args["y"] - 100) <= 1
    # an earlier step without a screenshot ends the run of images: they stay on the last user turns
    _, images = render_prompt(step, [_view(0), _view(1, screenshot="")],
                              RenderedFor(action_format="uitars", reads_images=True, history_images=2))
    assert images == ["images/s2.jpg"]
    assert render_prompt(_view(0, screenshot=""), [], UITARS)[1] == []


def test_history_images_beyond_the_window_widen_it():
    history, step = [_view(n) for n in range(6)], _view(6)
    target = RenderedFor(action_format="uitars", reads_images=True, history_images=5)
    messages, images = render_prompt(step, history, target)
    assert len(images) == 6 and sum(1 for m in messages if m["role"] == "user") == 6


@pytest.mark.parametrize("target", [RenderedFor(style="named"), UITARS], ids=["loupe-text", "uitars-images"])
def test_an_episodes_prompts_are_the_same_with_the_kept_texts_as_without(target):
    # episode_rows keeps one dict for an episode's prompts, where each step's screen, history entry and texts are
    # made once; the prompts must be those made from scratch, for steps inside and beyond the history window
    views = [_view(n) for n in range(9)]
    views[4] = StepView(instruction=views[4].instruction, url=views[4].url, elements=views[4].elements, width=160,
                        height=210, screenshot="images/s4.jpg", thought="", action=None, raw="I am not sure")
    kept: dict = {}
    for n in range(len(views)):
        assert render_prompt(views[n], views[:n], target, screens=kept) == render_prompt(views[n], views[:n], target)
    assert any(key[-1] == "summary" for key in kept)  # the older steps' summaries were kept, not only the screens


def test_kept_texts_are_not_used_for_history_given_as_pairs():
    # pairs become new objects on each call, and a new object may take a dead one's identity: no texts are kept
    kept: dict = {}
    first = render_messages(instruction="Click", observation_text="Task: Click\nnow",
                            history=[("a", "Thought: x\nAction: wait()")], texts=kept)
    assert kept == {} and first[2]["content"] == "Thought: x\nAction: wait()"


def _grpo(**changes) -> dict:
    reward = GRPORow.env_reward("miniwob", "click-option", 3, [Action("click", {"x": 1, "y": 2})])
    row = GRPORow(messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "Task: go"}],
                  images=["images/a.jpg"], format="uitars", reward=reward, width=160, height=210,
                  rendered_for=UITARS).to_dict()
    return {**row, **changes}


def test_a_grpo_row_round_trips_and_its_env_reward_names_the_prefix_in_loupes_grammar():
    row = _grpo()
    assert row["reward"] == {"kind": "env", "env": "miniwob", "task": "click-option", "seed": 3,
                             "prefix": ["click(x=1, y=2)"]}
    assert row_from_dict("grpo", row, "row 1").to_dict() == row
    sizeless = {k: v for k, v in row.items() if k not in ("width", "height")}
    assert GRPORow.from_dict(sizeless, "row 2").to_dict() == sizeless  # the size is then read off the screenshot
    text = {**row, "images": [], "format": "loupe", "rendered_for": RenderedFor(style="named").to_dict()}
    assert row_from_dict("rl", text, "row 3").to_dict() == text  # a text model's step: the screen in words only


@pytest.mark.parametrize("row, message", [
    ({"prompt": []}, "rl.jsonl:2: an RL row needs a 'messages' prompt (keys found: ['prompt'])"),
    (_grpo(messages=[{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]),
     "rl.jsonl:2: messages must end with the user turn the answer replies to, not a assistant turn"),
    (_grpo(images=["a.jpg", "b.jpg"]), "rl.jsonl:2: 2 images but 1 user turns"),
    (_grpo(format="ui-tars"), "rl.jsonl:2: unknown answer format 'ui-tars'"),
    (_grpo(format="loupe"), "rl.jsonl:2: format is loupe but the row was rendered for uitars answers"),
    (_grpo(width=0), "rl.jsonl:2: width is the screenshot's size in whole pixels, got 0"),
    (_grpo(height=None), "rl.jsonl:2: give both width and height (the screenshot's size) or neither"),
    (_grpo(reward="env"), "rl.jsonl:2: an RL row needs 'reward', an object saying how an answer is scored"),
    (_grpo(reward={"kind": "vibes"}), "rl.jsonl:2: unknown reward kind 'vibes'; expected one of: action, env"),
])
def test_a_malformed_grpo_row_is_refused_with_a_message_naming_the_row(row, message):
    with pytest.raises(ValueError) as caught:
        GRPORow.from_dict(row, "rl.jsonl:2")
    assert str(caught.value).startswith(message), str(caught.value)
