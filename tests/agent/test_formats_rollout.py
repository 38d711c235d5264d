"""The rollout reads and writes UI-TARS's answers on the grid the served checkpoint's processor shows it (issue 36):
its pixel limits (RolloutConfig.pixels, from agent.formats.pixel_limits) reach the parse of every answer, the earlier
turns of the prompt and the actions named in rejection feedback. On a 160x210 MiniWoB screen the ui-tars package's
minimum (78,400 pixels) makes a 252x336 grid, a processor with Qwen's minimum (3,136) a 168x224 one."""

from __future__ import annotations

import pytest

from agent import formats
from agent.actions import Action
from agent.envs.base import Element, Env, Observation, StepResult
from agent.policies.base import Policy, PolicyOutput
from agent.rollout import Decision, Supervisor, rejection_feedback, run_episode

QWEN = {"min_pixels": 3136, "max_pixels": 12845056}  # Qwen2.5-VL's / UI-TARS-1.5's preprocessor_config.json
ANSWER = "Thought: The OK button.\nAction: click(start_box='<|box_start|>(84,112)<|box_end|>')"


class Screen(Env):
    """A 160x210 screen (MiniWoB's) that records what ran."""

    def __init__(self):
        self.actions = []

    def _obs(self):
        return Observation("Click OK.", "fake://", b"", 160, 210, [Element("button", "OK", 80, 105, 20, 10)])

    def reset(self, task, seed):
        self.actions.clear()
        return self._obs()

    def step(self, action):
        self.actions.append(action)
        return StepResult(self._obs(), 1.0, True, {})

    def close(self):
        pass


class Fixed(Policy):
    name = "fixed"

    def __init__(self, text: str):
        self.text, self.prompts = text, []

    def act(self, messages, *, temperature=None):
        self.prompts.append(messages)
        return PolicyOutput(text=self.text, model="fixed")


def test_the_grid_point_84_112_is_the_screens_80_105_under_qwens_limits():
    turn = formats.parse(ANSWER, format="uitars", width=160, height=210, **QWEN)
    assert turn.action == Action("click", {"x": 80, "y": 105})


@pytest.mark.parametrize("pixels, clicked", [(QWEN, {"x": 80, "y": 105}), (None, {"x": 53, "y": 70})])
def test_the_rollout_clicks_where_the_served_processors_grid_says(pixels, clicked):
    env = Screen()
    result = run_episode(env, Fixed(ANSWER), task="t", seed=0, max_steps=1, action_format="uitars", pixels=pixels)
    assert env.actions == [Action("click", clicked)]  # without the limits: the package's 252x336 grid, 1.5x off
    assert result.steps[0].turn.action == Action("click", clicked)


class RejectOnce(Supervisor):
    def __init__(self):
        self.seen = 0

    def review(self, index, observation, proposal, *, attempt=1, repeated=False, confidence=None):
        self.seen += 1
        return Decision("reject", reason="not that one") if self.seen == 1 else Decision("approve")


def test_feedback_and_earlier_turns_are_written_on_the_same_grid():
    policy = Fixed(ANSWER)
    run_episode(Screen(), policy, task="t", seed=0, max_steps=1, action_format="uitars", pixels=QWEN,
                supervisor=RejectOnce(), repeat_retries=0)
    feedback = policy.prompts[1][-1]["content"]
    assert "(84,112)" in feedback and "not that one" in feedback  # the rejected click, as the model wrote it
    assert rejection_feedback([(formats.parse(ANSWER, format="uitars", width=160, height=210, **QWEN), "no")],
                              "uitars", 160, 210) != rejection_feedback(
        [(formats.parse(ANSWER, format="uitars", width=160, height=210, **QWEN), "no")], "uitars", 160, 210, QWEN)

    class Twice(Screen):
        def step(self, action):
            self.actions.append(action)
            return StepResult(self._obs(), 0.0, len(self.actions) == 2, {})

    policy = Fixed(ANSWER)
    run_episode(Twice(), policy, task="t", seed=0, max_steps=2, action_format="uitars", pixels=QWEN)
    earlier = [m["content"] for m in policy.prompts[1] if m["role"] == "assistant"]
    assert earlier == [ANSWER]  # step 0's click rendered back on the 168x224 grid: the answer as written


@pytest.mark.parametrize("pixels, why", [({"min_pixels": 0}, "min_pixels must be a positive whole number"),
                                         ({"min_pixels": 9, "max_pixels": 4}, "min_pixels 9 is more than max_pixels"),
                                         ({"max_pixel": 4}, "pixels takes min_pixels and max_pixels")])
def test_bad_pixel_limits_are_refused_before_the_episode(pixels, why):
    env = Screen()
    with pytest.raises(ValueError, match=why):
        run_episode(env, Fixed(ANSWER), task="t", seed=0, max_steps=1, action_format="uitars", pixels=pixels)
    assert env.actions == []
