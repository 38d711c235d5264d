"""Scripted solutions of the shipped desktop tasks: the actions a person would take, for tests and demos.

A solution sees only the first observation (its elements give the calculator's buttons) and
returns the canonical actions to play, ending with ``finished``. Keyboard-driven where the app
allows it, so a solution does not depend on where a window happened to open.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.actions import Action
from agent.envs.base import Observation

__all__ = ["SOLUTIONS", "solution_for"]


def _type(text: str) -> Action:
    return Action("type", {"text": text})


def _key(keys: str) -> Action:
    return Action("hotkey", {"keys": keys})


def _done(answer: str = "") -> Action:
    return Action("finished", {"answer": answer})


def _shell(command: str) -> Callable[[Observation], list[Action]]:
    return lambda obs: [_type(command + "\n"), Action("wait", {}), _done()]


def _click_buttons(labels: list[str]) -> Callable[[Observation], list[Action]]:
    def solve(obs: Observation) -> list[Action]:
        buttons = {e.text: e for e in obs.elements if e.role in ("push button", "toggle button")}
        missing = [label for label in labels if label not in buttons]
        if missing:
            raise ValueError(f"no calculator buttons {missing} on the screen")
        return [Action("click", {"x": buttons[label].x, "y": buttons[label].y}) for label in labels] + [_done()]

    return solve


SOLUTIONS: dict[str, Callable[[Observation], list[Action]]] = {
    "desktop-terminal-greeting": _shell("echo 'hello desktop' > ~/greeting.txt"),
    "desktop-terminal-count": _shell("wc -l < ~/words.txt > ~/count.txt"),
    "desktop-files-archive": _shell("mv ~/report.txt ~/Archive/"),
    "desktop-files-mkdir": lambda obs: [_key("ctrl+shift+n"), Action("wait", {}), _key("ctrl+a"), _type("reports"),
                                        _key("enter"), _done()],
    "desktop-mousepad-write": lambda obs: [_type("Meeting at noon"), _key("ctrl+s"), _done()],
    "desktop-mousepad-fix": lambda obs: [_key("ctrl+a"), _type("The quick brown fox\n"), _key("ctrl+s"), _done()],
    "desktop-mousepad-json": lambda obs: [_type('{"theme": "dark", "font_size": 14}'), _key("ctrl+s"), _done()],
    "desktop-mousepad-sentence": lambda obs: [_type("The early bird catches the worm."), _key("ctrl+s"), _done()],
    "desktop-calc-multiply": _click_buttons(["1", "2", "3", "*", "4", "5", "="]),
    "desktop-calc-subtract": lambda obs: [_type("1024-25"), _key("enter"), _done()],
    "desktop-infeasible-photoshop": lambda obs: [_done("FAIL")],
}


def solution_for(task_id: str, observation: Observation) -> list[Action]:
    if task_id not in SOLUTIONS:
        raise KeyError(f"no scripted solution for desktop task {task_id!r}")
    return SOLUTIONS[task_id](observation)
