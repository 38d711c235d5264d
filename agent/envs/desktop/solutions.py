"""Scripted solutions of the shipped desktop tasks: the actions a person would take, for tests and demos.

A solution sees only the first observation (its elements give the calculator's buttons) and
returns the canonical actions to play, ending with ``finished``. Keyboard-driven where the app
allows it, so a solution does not depend on where a window happened to open.
"""

from __future__ import annotations

from collections.abc import Callable

from agent.actions import Action, Turn, format_turn
from agent.envs.base import Observation

__all__ = ["SOLUTIONS", "solution_for", "solve_step"]


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
    "desktop-sheet-total": lambda obs: [_key("ctrl+down"), _key("down"), _key("right"), _type("=SUM(B1:B3)\n"),
                                        _key("ctrl+s"), _done()],
    "desktop-sheet-convert": lambda obs: [_type("ssconvert ~/scores.csv ~/scores.xlsx\n"), Action("wait", {}),
                                          Action("wait", {}), _done()],
    "desktop-mousepad-append": lambda obs: [_key("ctrl+end"), _type("- call the bank\n"), _key("ctrl+s"), _done()],
    "desktop-files-rename": _shell("mv ~/draft.txt ~/final.txt"),
    "desktop-calc-average": lambda obs: [_type("(14+27+40)/3"), _key("enter"), _done()],
    "desktop-hybrid-count": lambda obs: [Action("shell", {"command": "ls ~/notes/*.txt | wc -l"}), _type("3"),
                                         _key("ctrl+s"), _done()],
}


def solution_for(task_id: str, observation: Observation) -> list[Action]:
    if task_id not in SOLUTIONS:
        raise KeyError(f"no scripted solution for desktop task {task_id!r}")
    return SOLUTIONS[task_id](observation)


def _thought(action: Action, observation: Observation) -> str:
    """A short, human-like reason for one scripted action (what a demonstration's turn says)."""
    a = action.args
    if action.name == "click":
        named = next((e.text for e in observation.elements if (e.x, e.y) == (a["x"], a["y"]) and e.text), "")
        return f'I click the "{named}" button.' if named else "I click there."
    if action.name == "type":
        return f"I type {a['text'].strip()!r}."
    if action.name == "hotkey":
        return f"I press {a['keys']}."
    if action.name == "wait":
        return "I wait for it to finish."
    if action.name == "shell":
        return f"I run {a['command']!r} in the shell."
    if action.name == "finished":
        return "This cannot be done on this computer." if a["answer"] else "The task is done."
    return ""


def solve_step(task_id: str, observation: Observation, history: list[Turn]) -> Turn:
    """The next turn of ``task_id``'s scripted solution (for the ``scripted`` policy backend).

    How far the solution has got is read from the turns already taken (the prompt's recent ones): all of
    them when they are the solution's first steps, else the longest stretch of the solution that the last
    turns end with (what a person did before it is skipped over); where nothing matches it starts again."""
    plan = solution_for(task_id, observation)
    done = [turn.action.to_text() for turn in history if turn.action is not None]
    steps = [action.to_text() for action in plan]
    position = 0
    if done and done == steps[:len(done)]:  # the whole solution so far (a repeated key is no ambiguity then)
        position = len(done)
    else:
        for k in range(len(steps), 0, -1):
            m = min(k, len(done))
            if m and done[len(done) - m:] == steps[k - m:k]:
                position = k
                break
    action = plan[min(position, len(plan) - 1)]
    thought = _thought(action, observation)
    return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))
