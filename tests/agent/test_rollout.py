"""The rollout loop: autonomous and supervised episodes in real Chromium on click-button,
its end reasons on a scripted stand-in environment, and policies that answer in another action
format (UI-TARS) and read screenshots."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from agent.actions import Action, Turn, format_turn, parse_action, parse_turn
from agent.envs import make_env
from agent.envs.base import Element, Env, EnvError, Observation, StepResult
from agent.policies import make_policy
from agent.formats import uitars
from agent.policies.base import Policy, PolicyOutput
from agent.policies.scripted import observation_from_prompt
from agent.images import image_bytes
from agent.prompt import FORMAT_SYSTEM_PROMPTS
from agent.rollout import Decision, Supervisor, run_episode

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def env():
    environment = make_env("miniwob")
    yield environment
    environment.close()


class Recorder(Policy):
    """Wraps a policy and remembers every prompt it was given."""

    name = "recorder"

    def __init__(self, inner: Policy | None = None, text: str | None = None):
        self.inner, self.text, self.prompts, self.temperatures = inner, text, [], []

    def act(self, messages, *, temperature=None):
        self.prompts.append(messages)
        self.temperatures.append(temperature)
        if self.text is not None:
            return PolicyOutput(text=self.text, model="fixed")
        return self.inner.act(messages, temperature=temperature)


def _target(observation: Observation) -> Element:
    wanted = observation.instruction.split('"')[1]
    return next(e for e in observation.elements if e.role == "button" and e.text == wanted)


def _click_turn(element: Element, thought: str) -> Turn:
    action = Action("click", {"x": element.x, "y": element.y})
    return Turn(thought, action, None, format_turn(thought, action))


@pytest.mark.browser
def test_autonomous_episode_with_scripted_policy_reaches_reward(env):
    policy = Recorder(make_policy("scripted", task="click-button"))
    seen = []
    result = run_episode(env, policy, task="click-button", seed=3, max_steps=3, on_step=seen.append)
    assert result.end_reason == "done" and result.reward >= 0.9
    assert seen == result.steps and len(seen) == 1
    step = seen[0]
    assert step.actor == "model" and step.proposal is None and step.done and step.index == 0
    assert step.prompt == policy.prompts[0] and step.prompt[0]["role"] == "system"
    assert step.output.text == step.turn.to_text() and set(step.timings) == {"observe", "policy", "execute"}
    assert step.timings["execute"] > 0


class ScriptSupervisor(Supervisor):
    """Answers each review with the next decision built from the observation."""

    def __init__(self, *decide):
        self.decide, self.reviews, self.attempts = list(decide), [], []

    def review(self, index, observation, proposal, *, attempt=1, repeated=False, confidence=None):
        self.reviews.append((index, proposal))
        self.attempts.append((attempt, repeated))
        return self.decide.pop(0)(observation, proposal)


@pytest.mark.browser
def test_supervisor_approval_runs_the_proposal(env):
    supervisor = ScriptSupervisor(lambda obs, p: Decision("approve"))
    result = run_episode(env, make_policy("scripted", task="click-button"), task="click-button", seed=4,
                         max_steps=3, supervisor=supervisor)
    assert result.end_reason == "done" and result.reward >= 0.9 and result.steps[0].actor == "model"
    assert supervisor.reviews[0][0] == 0 and not supervisor.reviews[0][1].is_void


@pytest.mark.browser
def test_supervisor_edit_runs_the_correction_and_keeps_the_proposal(env):
    wrong_policy = Recorder(text="Thought: guess\nAction: click(x=2, y=208)")
    supervisor = ScriptSupervisor(lambda obs, p: Decision("edit", turn=_click_turn(_target(obs), "the right one")))
    result = run_episode(env, wrong_policy, task="click-button", seed=5, max_steps=3, supervisor=supervisor)
    step = result.steps[0]
    assert result.end_reason == "done" and result.reward >= 0.9
    assert step.actor == "edited" and step.proposal.action == parse_action("click(x=2, y=208)")
    assert step.turn.thought == "the right one"


@pytest.mark.browser
def test_supervisor_reject_asks_again_with_feedback(env):
    policy = Recorder(make_policy("scripted", task="click-button"))
    supervisor = ScriptSupervisor(
        lambda obs, p: Decision("reject", reason="Not that one, look again."),
        lambda obs, p: Decision("approve"),
    )
    rejections = []
    result = run_episode(env, policy, task="click-button", seed=6, max_steps=3, supervisor=supervisor,
                         on_reject=rejections.append)
    assert result.end_reason == "done" and len(policy.prompts) >= 2
    assert "Feedback" not in policy.prompts[0][-1]["content"]
    [rejection] = rejections
    assert rejection.index == 0 and rejection.attempt == 1 and rejection.reason == "Not that one, look again."
    assert rejection.prompt == policy.prompts[0] and rejection.turn == supervisor.reviews[0][1]
    assert policy.prompts[1][-1]["content"].endswith(
        f"\nFeedback: A person rejected your proposal {rejection.turn.action.to_text()} "
        "(reason: Not that one, look again.). Propose a different action.")
    assert result.steps[0].info["rejections"] == 1
    assert result.steps[0].prompt == policy.prompts[-1]


def _texts_policy(*texts):
    """A policy that answers the given texts in turn (the last one for ever)."""
    answers = list(texts)
    policy = Recorder(text="")

    def act(messages, *, temperature=None):
        policy.prompts.append(messages)
        policy.temperatures.append(temperature)
        return PolicyOutput(text=answers.pop(0) if len(answers) > 1 else answers[0])

    policy.act = act
    return policy


def test_every_reject_of_a_step_is_in_the_next_prompt_with_its_reason():
    policy = _texts_policy("Thought: a\nAction: click(x=1, y=1)", "Thought: b\nAction: click(x=2, y=2)",
                           "Thought: c\nAction: wait()")
    supervisor = ScriptSupervisor(lambda obs, p: Decision("reject", reason="wrong button"),
                                  lambda obs, p: Decision("reject"), lambda obs, p: Decision("approve"))
    result = run_episode(FakeEnv(), policy, task="t", seed=0, max_steps=1, supervisor=supervisor)
    assert [p.action.to_text() for _, p in supervisor.reviews] == ["click(x=1, y=1)", "click(x=2, y=2)", "wait()"]
    assert supervisor.attempts == [(1, False), (2, False), (3, False)]
    assert policy.prompts[2][-1]["content"].endswith(
        "Feedback: A person rejected your proposals click(x=1, y=1) (reason: wrong button); click(x=2, y=2). "
        "Propose a different action.")
    assert result.steps[0].turn.action.to_text() == "wait()" and result.steps[0].actor == "model"


def test_a_proposal_that_repeats_a_rejected_one_is_sampled_again_and_flagged_if_it_still_repeats():
    same = "Thought: a\nAction: click(x=1, y=1)"
    # greedy repeats, the first sampled answer repeats too, the second differs
    policy = _texts_policy(same, same, same, "Thought: b\nAction: click(x=5, y=5)")
    supervisor = ScriptSupervisor(lambda obs, p: Decision("reject"), lambda obs, p: Decision("approve"))
    run_episode(FakeEnv(), policy, task="t", seed=0, max_steps=1, supervisor=supervisor, repeat_retries=2,
                repeat_temperature=0.9)
    assert policy.temperatures == [None, None, 0.9, 0.9]
    assert supervisor.attempts == [(1, False), (2, False)]
    assert supervisor.reviews[1][1].action.to_text() == "click(x=5, y=5)"

    stubborn = _texts_policy(same)  # always the same answer, however it is asked
    supervisor = ScriptSupervisor(lambda obs, p: Decision("reject"), lambda obs, p: Decision("reject"),
                                  lambda obs, p: Decision("approve"))
    rejections = []
    run_episode(FakeEnv(), stubborn, task="t", seed=0, max_steps=1, supervisor=supervisor, repeat_retries=2,
                on_reject=rejections.append)
    assert supervisor.attempts == [(1, False), (2, True), (3, True)]  # the person is told it repeats
    assert [(r.attempt, r.repeated) for r in rejections] == [(1, False), (2, True)]
    assert stubborn.temperatures == [None, None, 1.0, 1.0, None, 1.0, 1.0]


@pytest.mark.browser
def test_supervisor_takeover_act_and_finish(env):
    policy = make_policy("scripted", task="click-button")
    blank = Element("area", "", 150, 205, 1, 1)  # a corner of the task area that holds nothing
    supervisor = ScriptSupervisor(
        lambda obs, p: Decision("act", turn=_click_turn(blank, "I try the corner")),
        lambda obs, p: Decision("finish", outcome="failure"),
    )
    seen = []
    result = run_episode(env, policy, task="click-button", seed=7, max_steps=5, supervisor=supervisor,
                         on_step=seen.append)
    assert result.end_reason == "supervisor_finish" and result.outcome == "failure" and len(seen) == 1
    step = seen[0]
    assert step.actor == "human" and step.turn.action == parse_action("click(x=150, y=205)")
    assert step.proposal.action == Action("click", {"x": _target(step.observation).x, "y": _target(step.observation).y})
    assert len(supervisor.reviews) == 2 and not step.done


@pytest.mark.browser
def test_replay_resumes_without_the_policy_then_continues(env):
    policy = Recorder(make_policy("scripted", task="click-button"))
    seen = []
    result = run_episode(env, policy, task="click-button", seed=8, max_steps=4, on_step=seen.append,
                         replay=[parse_action("wait()"), parse_action("click(x=150, y=205)")])
    assert result.end_reason == "done" and result.reward >= 0.9
    assert [s.info.get("replayed", False) for s in result.steps] == [True, True, False]
    assert [s.index for s in seen] == [2] and len(policy.prompts) == 1
    assert "Earlier actions" not in policy.prompts[0][1]["content"]  # both replayed steps fit the window
    assert [m["role"] for m in policy.prompts[0]] == ["system", "user", "assistant", "user", "assistant", "user"]


# -- end reasons on a scripted stand-in environment (no browser needed) -----------------------
class FakeEnv(Env):
    def __init__(self, fail_on_step: int | None = None, done_on: str | None = None):
        self.actions, self.fail_on_step, self.done_on = [], fail_on_step, done_on

    def _obs(self):
        return Observation("Do it.", "fake://", b"", 10, 10, [Element("button", "OK", 5, 5, 4, 4)])

    def reset(self, task, seed):
        self.actions.clear()
        return self._obs()

    def step(self, action):
        if self.fail_on_step is not None and len(self.actions) == self.fail_on_step:
            raise EnvError("browser crashed")
        self.actions.append(action)
        done = self.done_on == action.name
        return StepResult(self._obs(), 1.0 if done else 0.0, done, {})

    def close(self):
        pass


def test_void_turns_end_the_episode_and_are_recorded_without_executing():
    env, seen = FakeEnv(), []
    result = run_episode(env, Recorder(text="I think I should click"), task="t", seed=0, max_steps=10,
                         max_consecutive_void=3, on_step=seen.append)
    assert result.end_reason == "void_turns" and len(seen) == 3 and env.actions == []
    assert all(s.turn.is_void and s.info["void"] == "no 'Action:' line found" for s in seen)


def test_max_steps_policy_error_env_error_and_finished():
    assert run_episode(FakeEnv(), Recorder(text="Thought: x\nAction: wait()"), task="t", seed=0,
                       max_steps=4).end_reason == "max_steps"
    failing = Recorder(text="")
    failing.act = lambda messages, **_: PolicyOutput(text="", error="server down")
    broken = run_episode(FakeEnv(), failing, task="t", seed=0, max_steps=4)
    assert broken.end_reason == "policy_error" and broken.error == "server down"
    crashed = run_episode(FakeEnv(fail_on_step=1), Recorder(text="Thought: x\nAction: wait()"), task="t", seed=0,
                          max_steps=4)
    assert crashed.end_reason == "env_error" and "browser crashed" in crashed.error and len(crashed.steps) == 1
    done = run_episode(FakeEnv(done_on="finished"), Recorder(text='Thought: ok\nAction: finished(answer="42")'),
                       task="t", seed=0, max_steps=4)
    assert done.end_reason == "finished" and done.reward == 1.0


class CheckedEnv(FakeEnv):
    """A stand-in whose task check answers ``score`` (or raises), counting how often it was asked."""

    def __init__(self, score):
        super().__init__()
        self.score, self.checks = score, 0

    def evaluate(self, *, answer=None):
        self.checks += 1
        if isinstance(self.score, Exception):
            raise self.score
        return self.score


@pytest.mark.parametrize("score, reward, unscored, error", [
    (1.0, 1.0, False, None), (0.0, 0.0, False, None), (None, 0.0, True, None),
    (EnvError("the desktop died"), 0.0, True, "the desktop died")])
def test_a_persons_finish_is_scored_by_the_tasks_own_check(score, reward, unscored, error):
    env = CheckedEnv(score)
    finish = ScriptSupervisor(lambda obs, p: Decision("finish", outcome="success"))
    result = run_episode(env, Recorder(text="Thought: x\nAction: wait()"), task="t", seed=0, max_steps=4,
                         supervisor=finish)
    assert (result.end_reason, result.outcome) == ("supervisor_finish", "success")
    assert (result.reward, result.unscored, result.check_error, env.checks) == (reward, unscored, error, 1)
    assert env.actions == []  # the check looks; it does not act


def test_call_user_answer_reaches_the_next_prompt():
    class Answering(Supervisor):
        def review(self, index, observation, proposal, **_):
            return Decision("approve")

        def answer_call_user(self, index, question):
            return "the blue one" if question == "Which?" else None

    texts = iter(['Thought: unsure\nAction: call_user(question="Which?")', "Thought: ok\nAction: wait()"])
    policy = Recorder(text="")
    policy.act = lambda messages, **_: (policy.prompts.append(messages), PolicyOutput(text=next(texts)))[1]
    result = run_episode(FakeEnv(), policy, task="t", seed=0, max_steps=2, supervisor=Answering())
    assert result.end_reason == "max_steps"
    assert policy.prompts[1][-1]["content"].endswith("Feedback: The user answered: the blue one")


def test_decision_validates_kind_and_turn():
    with pytest.raises(ValueError, match="unknown decision"):
        Decision("maybe")
    with pytest.raises(ValueError, match="needs a turn"):
        Decision("edit", turn=parse_turn("nonsense"))


# -- a policy that answers as UI-TARS-1.5 does, reading the screenshot it is sent ---------------------------
def _images(messages) -> list[bytes]:
    return [image_bytes(part["image_url"]["url"]) for m in messages if isinstance(m["content"], list)
            for part in m["content"] if part["type"] == "image_url"]


class UITarsStub(Policy):
    """Answers like UI-TARS-1.5: ``click(start_box=...)`` on the smart_resized image of the screenshot it was
    sent (its size read from the image itself), after ``waits`` wait() turns; the target is the button the
    instruction names, found in the element lines of the prompt."""

    name = "uitars-stub"

    def __init__(self, waits: int = 0):
        self.waits, self.prompts = waits, []

    def act(self, messages, *, temperature=None):
        self.prompts.append(messages)
        if len(self.prompts) <= self.waits:
            return PolicyOutput(text="Thought: The page may still be loading.\nAction: wait()")
        width, height = Image.open(io.BytesIO(_images(messages)[-1])).size
        observation, _ = observation_from_prompt(messages)
        target = _target(observation)
        gx, gy = uitars.grid(width, height).from_pixels(target.x, target.y)
        return PolicyOutput(text=f"Thought: Click the {target.text} button.\n"
                                 f"Action: click(start_box='<|box_start|>({gx},{gy})<|box_end|>')")


@pytest.mark.browser
def test_uitars_answers_are_read_on_the_smart_resized_grid_and_the_click_lands_in_screenshot_pixels(env):
    policy = UITarsStub(waits=2)
    seen = []
    result = run_episode(env, policy, task="click-button", seed=11, max_steps=5, on_step=seen.append,
                         with_image=True, history_images=5, action_format="uitars")
    assert result.end_reason == "done" and result.reward >= 0.9, result
    assert [s.turn.action.name for s in seen] == ["wait", "wait", "click"]
    assert all(s.action_format == "uitars" for s in seen)
    click = seen[-1]
    target = _target(click.observation)
    grid = uitars.grid(click.observation.width, click.observation.height)
    assert (grid.units_x, grid.units_y) != (click.observation.width, click.observation.height)  # a real rescale
    assert click.turn.action.args == dict(zip("xy", grid.to_pixels(*grid.from_pixels(target.x, target.y))))
    assert abs(click.turn.action.args["x"] - target.x) <= 1 and abs(click.turn.action.args["y"] - target.y) <= 1
    assert "start_box" in click.output.text and click.turn.raw == click.output.text

    prompt = click.prompt
    assert prompt[0]["content"] == FORMAT_SYSTEM_PROMPTS["uitars"]
    # the current screenshot and both earlier ones, each the very bytes of its step's observation
    assert _images(prompt) == [s.observation.screenshot for s in seen]
    assert [m["content"] for m in prompt if m["role"] == "assistant"] == \
        ["Thought: The page may still be loading.\nAction: wait()"] * 2
    assert [len(_images(p)) for p in policy.prompts] == [1, 2, 3]


def test_uitars_rejection_feedback_names_the_action_on_the_models_grid_and_call_user_is_answered():
    answers = iter(["Thought: a\nAction: click(start_box='<|box_start|>(10,20)<|box_end|>')",
                    "Thought: unsure\nAction: call_user()", "Thought: ok\nAction: wait()"])
    policy = Recorder(text="")
    policy.act = lambda messages, **_: (policy.prompts.append(messages), PolicyOutput(text=next(answers)))[1]

    class Answering(ScriptSupervisor):
        def answer_call_user(self, index, question):
            return "the blue one" if question == "" else None

    supervisor = Answering(lambda obs, p: Decision("reject", reason="wrong place"), lambda obs, p: Decision("approve"),
                           lambda obs, p: Decision("approve"))
    rejections = []
    result = run_episode(FakeEnv(), policy, task="t", seed=0, max_steps=2, supervisor=supervisor,
                         on_reject=rejections.append, action_format="uitars")
    grid = uitars.grid(10, 10)  # a 10x10 screen is seen as 280x280
    px, py = grid.to_pixels(10, 20)
    assert supervisor.reviews[0][1].action == Action("click", {"x": px, "y": py})  # canonical, screenshot pixels
    assert rejections[0].action_format == "uitars"
    gx, gy = grid.from_pixels(px, py)  # the rejected action as the model would write it now
    assert policy.prompts[1][-1]["content"].endswith(
        f"Feedback: A person rejected your proposal click(start_box='<|box_start|>({gx},{gy})<|box_end|>') "
        "(reason: wrong place). Propose a different action.")
    assert policy.prompts[2][-1]["content"].endswith("Feedback: The user answered: the blue one")
    assert policy.prompts[2][2]["content"] == "Thought: unsure\nAction: call_user()"
    assert result.end_reason == "max_steps" and [s.action_format for s in result.steps] == ["uitars", "uitars"]


def test_an_answer_in_another_format_is_a_void_turn_with_its_reason():
    seen = []
    result = run_episode(FakeEnv(), Recorder(text="Thought: x\nAction: click(x=3, y=4)"), task="t", seed=0,
                         max_steps=5, max_consecutive_void=2, on_step=seen.append, action_format="pyautogui")
    assert result.end_reason == "void_turns" and all(s.turn.is_void for s in seen)
    assert "code block" in seen[0].turn.void_reason and seen[0].action_format == "pyautogui", seen[0].turn
    with pytest.raises(ValueError, match="unknown answer format"):
        run_episode(FakeEnv(), Recorder(text="x"), task="t", seed=0, max_steps=1, action_format="tars")
    with pytest.raises(ValueError, match="history_images"):
        run_episode(FakeEnv(), Recorder(text="x"), task="t", seed=0, max_steps=1, history_images=-1)


def test_a_loop_without_a_supervisor_runs_with_the_null_one():
    quiet = Supervisor()
    assert quiet.review(0, None, parse_turn("Thought: x\nAction: wait()")).kind == "approve"
    assert quiet.answer_call_user(0, "Which?") is None and quiet.watch_env(FakeEnv()) is None
    result = run_episode(FakeEnv(), Recorder(text='Thought: ask\nAction: call_user(question="Which?")'), task="t",
                         seed=0, max_steps=2)
    assert [s.actor for s in result.steps] == ["model", "model"]


def test_new_steps_their_rejections_and_the_supervisors_hooks_count_from_the_start_index():
    """A resumed episode whose stored void steps a replay skips: two actions replayed, its next step is stored at 4."""
    class Rejecting(ScriptSupervisor):
        def answer_call_user(self, index, question):
            self.asked = index
            return "yes"

    supervisor = Rejecting(lambda obs, p: Decision("reject", reason="no"), lambda obs, p: Decision("approve"),
                           lambda obs, p: Decision("approve"))
    watched, rejected, seen = [], [], []
    supervisor.watch_env = watched.append
    texts = iter(["Thought: a\nAction: wait()", 'Thought: b\nAction: call_user(question="Ok?")',
                  "Thought: c\nAction: wait()"])
    policy = Recorder(text="")
    policy.act = lambda messages, **_: PolicyOutput(text=next(texts))
    env = FakeEnv()
    result = run_episode(env, policy, task="t", seed=0, max_steps=4, supervisor=supervisor, start_index=4,
                         replay=[parse_action("wait()"), parse_action("wait()")], on_step=seen.append,
                         on_reject=rejected.append)
    assert watched == [env] and [s.index for s in result.steps] == [0, 1, 4, 5]  # the replayed ones: their places
    assert [index for index, _ in supervisor.reviews] == [4, 4, 5] and [r.index for r in rejected] == [4]
    assert [s.index for s in seen] == [4, 5] and supervisor.asked == 4  # the call_user was step 4


def test_a_start_index_before_the_end_of_the_replay_is_refused():
    with pytest.raises(ValueError, match="start_index 1 is before the end of the replay"):
        run_episode(FakeEnv(), Recorder(text="x"), task="t", seed=0, max_steps=3, start_index=1,
                    replay=[parse_action("wait()"), parse_action("wait()")])
