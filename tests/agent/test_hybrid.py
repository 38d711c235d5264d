"""Hybrid episodes: the shell action in the grammar and every answer format, and on a real desktop (the command
runs as the desktop's user in its home folder; its output is on the next screen)."""

from __future__ import annotations

import shutil

import pytest

from agent.actions import Action, parse_action
from agent.formats import FORMATS, parse, render

COMMAND = 'ls ~/notes/*.txt | wc -l && echo "done"'


@pytest.mark.parametrize("fmt", FORMATS)
def test_shell_round_trips_in_every_answer_format(fmt):
    action = Action("shell", {"command": COMMAND})
    turn = parse(render("I count them.", action, format=fmt, width=1280, height=720), format=fmt, width=1280,
                 height=720)
    assert turn.action == action and turn.thought == "I count them."


def test_shell_needs_its_command():
    assert parse_action('shell(command="pwd")') == Action("shell", {"command": "pwd"})
    for fmt, text in (("loupe", "Action: shell()"), ("uitars", "Action: shell()"),
                      ("qwen-relative", '<tool_call>\n{"name": "computer_use", "arguments": {"action": "shell"}}\n</tool_call>')):
        turn = parse(text, format=fmt, width=1280, height=720)
        assert turn.is_void and "command" in turn.void_reason, (fmt, turn.void_reason)


needs_desktop = pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("mousepad") is None,
                                   reason="needs the desktop packages (make test-tools installs them)")


@needs_desktop
def test_a_hybrid_desktop_runs_shell_commands_as_its_user_and_shows_the_output():
    import os

    from agent.envs.desktop import DesktopEnv

    with DesktopEnv(elements=False, shell_timeout_s=2.0) as env:
        obs = env.reset("desktop-hybrid-count", 0)
        assert obs.screen_text.startswith('Shell: shell(command="...") runs a command as you')
        result = env.step(Action("shell", {"command": "ls ~/notes/*.txt | wc -l; id -u; pwd"}))
        assert result.info["exit_code"] == 0 and not result.done and result.info["output"].startswith("3\n")
        lines = result.observation.screen_text.splitlines()
        assert lines[1:] == ["$ ls ~/notes/*.txt | wc -l; id -u; pwd", "3", str(env.desktop.uid), str(env.home)]
        if os.geteuid() == 0:
            assert env.desktop.uid != 0
        slow = env.step(Action("shell", {"command": "sleep 30"}))
        assert slow.info["exit_code"] is None and "ran over 2.0 s" in slow.info["error"]
        for action in (Action("type", {"text": "3"}), Action("hotkey", {"keys": "ctrl+s"})):
            env.step(action)
        assert env.step(Action("finished", {"answer": ""})).reward == 1.0

        env.reset("desktop-mousepad-write", 0)  # not hybrid: the shell is refused, the episode goes on
        refused = env.step(Action("shell", {"command": "echo Meeting at noon > ~/notes.txt"}))
        assert "has no shell" in refused.info["error"] and not (env.home / "notes.txt").exists()
        assert refused.observation.screen_text == ""


def test_the_terminal_runs_a_shell_action_as_a_command_line():
    from agent.envs.terminal import TerminalEnv

    with TerminalEnv() as env:
        env.reset("terminal-hello", 0)
        result = env.step(Action("shell", {"command": "echo hi > probe.txt && cat probe.txt"}))
        assert result.info["exit_code"] == 0 and (env.workdir / "probe.txt").read_text() == "hi\n"
        assert result.observation.screen_text.splitlines()[-3:] == ["$ echo hi > probe.txt && cat probe.txt", "hi", "$ "]


def test_a_web_page_answers_a_shell_action_with_an_error():
    from agent.envs import make_env

    with make_env("miniwob") as env:
        env.reset("click-button", 0)
        result = env.step(Action("shell", {"command": "touch /tmp/loupe-should-not-exist"}))
        assert result.info["error"].startswith("a web page has no shell") and not result.done
