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
