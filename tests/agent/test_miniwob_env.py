"""MiniWoB++ in real Chromium through the Env interface (one browser for the module)."""

from __future__ import annotations

import io
import os
import signal
import time

import pytest
from PIL import Image

from agent.actions import Action, parse_action
from agent.envs import EnvError, make_env
from agent.envs.miniwob import TASKS
from agent.solvers import solve_step

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def env():
    environment = make_env("miniwob")
    yield environment
    environment.close()


@pytest.fixture
def fresh(env):
    """Run a test with a fresh page load per episode (the default), then restore."""
    previous, env.fresh_context = env.fresh_context, True
    yield env
    env.fresh_context = previous


def _record_events(env) -> None:
    env._page.evaluate(
        """() => {
            window.__events = [];
            for (const type of ['click', 'dblclick', 'contextmenu', 'mousedown', 'mouseup', 'wheel']) {
                document.addEventListener(type, (e) => window.__events.push(
                    {type, x: e.clientX, y: e.clientY, button: e.button, dy: e.deltaY || 0}), true);
            }
        }"""
    )


def _events(env) -> list[dict]:
    return env._page.evaluate("() => window.__events")


def test_reset_gives_instruction_jpeg_of_task_area_and_elements(fresh):
    obs = fresh.reset("click-button", 3)
    image = Image.open(io.BytesIO(obs.screenshot))
    assert image.format == "JPEG" and image.size == (obs.width, obs.height) == (160, 210)
    assert obs.instruction.startswith('Click on the "') and obs.url.endswith("/miniwob/click-button.html")
    wanted = obs.instruction.split('"')[1]
    assert any(e.role == "button" and e.text == wanted for e in obs.elements)
    assert all(0 <= e.x < 160 and 0 <= e.y < 210 for e in obs.elements)
    assert f'[button] "{wanted}" at (' in obs.elements_text()


def test_same_seed_gives_same_episode_and_other_seeds_differ(env, fresh):
    fresh.fresh_context = True
    a = fresh.reset("click-checkboxes", 11)
    fresh.fresh_context = False
    b = fresh.reset("click-checkboxes", 11)  # restarted inside the loaded page
    c = fresh.reset("click-checkboxes", 12)
    assert (a.instruction, a.elements) == (b.instruction, b.elements)
    assert (c.instruction, c.elements) != (a.instruction, a.elements)


def test_an_episode_leaves_no_cookie_storage_tab_or_page_state_to_the_next(fresh):
    fresh.reset("click-button", 3)
    page, context = fresh._page, fresh._context
    page.evaluate("""() => {
        document.cookie = 'left=1; path=/'; localStorage.setItem('left', '1'); sessionStorage.setItem('left', '1');
        window.leftOver = 1; document.body.dataset.left = '1';
        indexedDB.open('left-db');
    }""")
    context.new_page()  # a tab the episode opened
    obs = fresh.reset("click-button", 4)
    assert fresh._page is page  # the page was loaded afresh, not replaced with a new context
    assert context.pages == [page] and context.cookies() == []
    assert page.evaluate("""async () => [document.cookie, localStorage.length, sessionStorage.length,
        typeof window.leftOver, document.body.dataset.left ?? null,
        (await indexedDB.databases()).map(d => d.name)]""") == ["", 0, 0, "undefined", None, []]
    assert obs.instruction.startswith('Click on the "')


def test_a_page_that_cannot_be_reloaded_is_replaced_with_a_new_context(fresh):
    fresh.reset("click-button", 3)
    old = fresh._context
    fresh._cdp.detach()  # the reload's clearing of site data now fails
    obs = fresh.reset("click-button", 4)
    assert fresh._context is not old and obs.instruction.startswith('Click on the "')


def test_click_on_element_centre_gives_the_page_reward(env):
    obs = env.reset("click-test", 5)
    button = next(e for e in obs.elements if e.role == "button")
    result = env.step(Action("click", {"x": button.x, "y": button.y}))
    assert result.done and result.reward >= 0.9
    assert result.info["raw_reward"] == 1.0
    assert result.observation.instruction == obs.instruction  # not the sync screen's


def test_wrong_click_gives_negative_reward(env):
    obs = env.reset("click-test-2", 2)
    two = next(e for e in obs.elements if e.text == "TWO")
    result = env.step(Action("click", {"x": two.x, "y": two.y}))
    assert result.done and result.reward == -1.0


def test_coordinates_map_exactly_to_page_mouse_events(env):
    env.reset("click-test", 0)
    _record_events(env)
    env.step(parse_action("right_click(x=17, y=190)"))
    env.step(parse_action("double_click(x=150, y=200)"))
    env.step(parse_action("drag(x1=5, y1=60, x2=30, y2=90)"))
    env.step(parse_action('scroll(x=80, y=100, direction="down")'))
    events = _events(env)
    assert {"type": "contextmenu", "x": 17, "y": 190, "button": 2, "dy": 0} in events
    assert {"type": "dblclick", "x": 150, "y": 200, "button": 0, "dy": 0} in events
    downs = [e for e in events if e["type"] == "mousedown" and e["button"] == 0]
    ups = [e for e in events if e["type"] == "mouseup" and e["button"] == 0]
    assert (downs[-1]["x"], downs[-1]["y"]) == (5, 60) and (ups[-1]["x"], ups[-1]["y"]) == (30, 90)
    wheel = [e for e in events if e["type"] == "wheel"]
    assert wheel and wheel[-1]["x"] == 80 and wheel[-1]["y"] == 100 and wheel[-1]["dy"] > 0


def test_type_and_hotkey_edit_a_focused_field(env):
    obs = env.reset("enter-text", 4)
    box = next(e for e in obs.elements if e.role == "textbox")
    env.step(Action("click", {"x": box.x, "y": box.y}))
    obs = env.step(parse_action('type(text="abc")')).observation
    assert next(e for e in obs.elements if e.role == "textbox").text == "abc"
    env.step(parse_action('hotkey(keys="ctrl+a")'))
    obs = env.step(parse_action('type(text="xy")')).observation
    field = next(e for e in obs.elements if e.role == "textbox")
    assert field.text == "xy" and field.focused


def test_off_screen_action_is_an_error_result_not_an_exception(env):
    env.reset("click-test", 1)
    result = env.step(parse_action("click(x=999, y=5)"))
    assert not result.done and result.reward == 0.0
    assert result.info["error"] == "click at (999, 5) is outside the 160x210 screenshot"


def test_unknown_hotkey_is_an_error_result(env):
    env.reset("click-test", 1)
    result = env.step(parse_action('hotkey(keys="ctrl+banana")'))
    assert not result.done and "unknown key 'banana'" in result.info["error"]


def test_wait_call_user_and_finished(env):
    env.reset("click-test", 1)
    started = time.monotonic()
    assert not env.step(parse_action("wait()")).done
    assert time.monotonic() - started >= env.wait_ms / 1000
    asked = env.step(parse_action('call_user(question="Which one?")'))
    assert not asked.done and asked.info == {"call_user": "Which one?"}
    ended = env.step(parse_action('finished(answer="gave up")'))
    assert ended.done and ended.reward == 0.0 and ended.info["answer"] == "gave up"
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step(parse_action("wait()"))


def test_unknown_task_raises_env_error(env):
    with pytest.raises(EnvError, match="unknown MiniWoB"):
        env.reset("no-such-task", 0)


def test_crashed_browser_fails_the_episode_and_is_replaced_on_reset(env):
    env.reset("click-test", 1)
    pid = env.browser_pid
    assert pid
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.3)
    with pytest.raises(EnvError, match="browser failed during click"):
        env.step(parse_action("click(x=10, y=100)"))
    obs = env.reset("click-test", 1)
    assert env.browser_pid != pid and obs.instruction == "Click the button."


def test_a_page_that_never_becomes_ready_fails_the_episode_with_the_reason_and_the_next_reset_recovers(env):
    from agent.policies import make_policy
    from agent.rollout import run_episode

    saved = env.fresh_context, env.ready_timeout_s
    env.fresh_context, env.ready_timeout_s = False, 1.0  # the page is reused, so the sabotage below sticks
    try:
        env.reset("click-test", 1)
        # The task script hangs: a new episode never sets WOB_TASK_READY.
        env._page.evaluate("() => { core.startEpisodeReal = () => { WOB_TASK_READY = false; }; }")
        started = time.monotonic()
        result = run_episode(env, make_policy("scripted", task="click-test"), task="click-test", seed=2, max_steps=3)
        assert result.end_reason == "env_error" and "never became ready in 1.0 s" in result.error
        assert result.steps == [] and time.monotonic() - started < 10
        obs = env.reset("click-test", 2)  # the broken page was dropped, not reused
        assert obs.instruction == "Click the button."
    finally:
        env.fresh_context, env.ready_timeout_s = saved


@pytest.mark.parametrize("task", sorted(TASKS))
def test_solver_reaches_reward_on_20_seeds(env, task):
    env.fresh_context = False  # seeds are the same episode either way (tested above); this is faster
    failures = []
    for seed in range(20):
        obs = env.reset(task, seed)
        history, reward = [], 0.0
        for _ in range(TASKS[task].max_steps):
            turn = solve_step(task, obs, history)
            assert turn.thought and not turn.is_void
            history.append(turn)
            result = env.step(turn.action)
            obs = result.observation
            if result.done:
                reward = result.reward
                break
        if reward < 0.9:
            failures.append((seed, reward, [t.action.to_text() for t in history]))
    assert not failures, failures


def _live_frame(env, *, other_than: bytes | None = None, timeout: float = 5.0):
    """The env's live frame, once there is one (and it differs from ``other_than``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = env.live_frame()
        if frame is not None and frame.jpeg != other_than:
            return frame
    raise AssertionError("no (new) live frame came")


def test_live_frames_follow_the_page_as_it_changes_without_a_step(env):
    env.reset("click-test", 5)
    try:
        first = _live_frame(env)
        assert (first.width, first.height) == (160, 210)
        assert Image.open(io.BytesIO(first.jpeg)).size == (160, 210)
        env._page.evaluate("() => { document.getElementById('area').style.background = 'rgb(255, 0, 0)'; }")
        changed = _live_frame(env, other_than=first.jpeg)
        r, g, b = Image.open(io.BytesIO(changed.jpeg)).convert("RGB").getpixel((40, 120))  # in the task area
        assert r > 200 and g < 60 and b < 60
    finally:
        env.live_stop()
    obs = env.reset("click-test", 6)  # a new episode's page streams anew
    assert _live_frame(env).jpeg[:2] == b"\xff\xd8" and obs.width == 160
    env.live_stop()
