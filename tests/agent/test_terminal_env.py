"""The terminal sandbox: commands, limits, no network, file checks, and its scripted solvers."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from agent.actions import parse_action
from agent.envs import EnvError, make_env, tasks_for
from agent.envs.terminal import TASKS
from agent.prompt import render_observation
from agent.solvers import solve_step


@pytest.fixture
def env():
    environment = make_env("terminal", command_timeout_s=1.0, max_output_chars=200)
    yield environment
    environment.close()


def _run(env, command: str):
    env.step(parse_action(f'type(text="{command}")'))
    return env.step(parse_action('hotkey(keys="enter")'))


def test_reset_gives_instruction_screen_text_and_a_jpeg(env):
    obs = env.reset("terminal-hello", 1)
    assert obs.instruction.startswith("Create a file named") and obs.elements == []
    assert obs.screen_text == "Screen:\n$ " and obs.url == "terminal://terminal-hello"
    image = Image.open(io.BytesIO(obs.screenshot))
    assert image.format == "JPEG" and image.size == (obs.width, obs.height)
    assert render_observation(obs).endswith("Screen:\n$ ")


def test_typed_command_runs_on_enter_in_the_episode_directory(env):
    env.reset("terminal-count", 0)
    typed = env.step(parse_action('type(text="echo hi > a.txt; pwd")'))
    assert typed.observation.screen_text.endswith("$ echo hi > a.txt; pwd") and not (env.workdir / "a.txt").exists()
    result = env.step(parse_action('hotkey(keys="enter")'))
    assert (env.workdir / "a.txt").read_text() == "hi\n"
    assert str(env.workdir) in result.observation.screen_text and result.info["exit_code"] == 0


def test_newline_in_typed_text_runs_the_line(env):
    env.reset("terminal-count", 0)
    result = env.step(parse_action('type(text="echo one\\necho tw")'))
    assert "$ echo one\none\n$ echo tw" in result.observation.screen_text


def test_line_editing_keys(env):
    env.reset("terminal-count", 0)
    env.step(parse_action('type(text="ls -x")'))
    env.step(parse_action('hotkey(keys="backspace")'))
    assert env.step(parse_action('hotkey(keys="ctrl+l")')).observation.screen_text.endswith("$ ls -")
    assert env.step(parse_action('hotkey(keys="ctrl+u")')).observation.screen_text == "Screen:\n$ "
    assert "does not support" in env.step(parse_action('hotkey(keys="alt+f4")')).info["error"]


def test_command_time_limit_stops_the_command(env):
    env.reset("terminal-count", 0)
    result = _run(env, "sleep 30")
    assert "ran over 1.0 s" in result.info["error"] and result.info["exit_code"] is None
    assert "[stopped after 1.0 s]" in result.observation.screen_text


def test_output_is_truncated(env):
    env.reset("terminal-count", 0)
    result = _run(env, "seq 1 1000")
    assert "[output truncated]" in result.observation.screen_text


def test_no_network_and_no_proxy_variables(env):
    env.reset("terminal-count", 0)
    result = _run(env, "env | grep -ci proxy; cat /proc/net/dev | grep -c :")
    lines = result.observation.screen_text.splitlines()
    assert lines[-3] == "0"  # no proxy variables reach the command
    assert lines[-2] == "1"  # only the loopback interface exists in the sandbox's namespace


def test_pointer_actions_are_error_results(env):
    env.reset("terminal-count", 0)
    result = env.step(parse_action("click(x=3, y=4)"))
    assert not result.done and "no pointer" in result.info["error"]


def test_finished_without_the_files_gives_no_reward(env):
    env.reset("terminal-hello", 0)
    result = env.step(parse_action("finished()"))
    assert result.done and result.reward == 0.0
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step(parse_action("wait()"))


def test_unknown_task_raises(env):
    with pytest.raises(EnvError, match="unknown terminal task"):
        env.reset("terminal-nope", 0)


def test_episode_directories_are_fresh_and_removed(env):
    env.reset("terminal-hello", 0)
    first = env.workdir
    _run(env, "touch leftover")
    env.reset("terminal-hello", 0)
    assert env.workdir != first and not first.exists() and not (env.workdir / "leftover").exists()


@pytest.mark.parametrize("task", sorted(TASKS))
def test_terminal_solver_reaches_reward(env, task):
    assert task in tasks_for("terminal")
    for seed in range(5):
        obs, history = env.reset(task, seed), []
        for _ in range(TASKS[task].max_steps):
            turn = solve_step(task, obs, history)
            history.append(turn)
            result = env.step(turn.action)
            obs = result.observation
            if result.done:
                break
        assert result.done and result.reward == 1.0, (seed, [t.action.to_text() for t in history])


def test_solver_clears_a_wrong_command_line(env):
    obs = env.reset("terminal-hello", 0)
    obs = env.step(parse_action('type(text="rm -rf x")')).observation
    assert solve_step("terminal-hello", obs, []).action == parse_action('hotkey(keys="ctrl+u")')
