"""Scripted solvers: the demonstrations a small model is cold-started on.

A solver decides ONLY from what the model will also see, the ``Observation`` (instruction and
elements) and the history of its own turns, never from hidden page state, so a model that
imitates it can learn the same mapping. Each turn carries a short, human-like thought.
Multi-step tasks (focus a field, then type; several checkboxes; login) take several turns and end
with the step that makes the page give its reward.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agent.actions import Action, Turn, format_turn
from agent.envs.base import Element, Observation

__all__ = ["SOLVERS", "SolverError", "solve_step"]


class SolverError(ValueError):
    """The observation does not contain what the task's solver needs (e.g. no such button)."""


Solver = Callable[[Observation, list[Turn]], Turn]


def _turn(thought: str, action: Action) -> Turn:
    return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))


def _click(element: Element, thought: str) -> Turn:
    return _turn(thought, Action("click", {"x": element.x, "y": element.y}))


def _quoted(instruction: str) -> list[str]:
    return re.findall(r'"([^"]*)"', instruction)


def _find(observation: Observation, role: str, text: str | None = None) -> Element:
    for element in observation.elements:
        if element.role == role and (text is None or element.text.strip() == text):
            return element
    wanted = f'{role} "{text}"' if text is not None else role
    raise SolverError(f"no {wanted} on the screen; instruction was {observation.instruction!r}")


def _of_role(observation: Observation, *roles: str) -> list[Element]:
    return [element for element in observation.elements if element.role in roles]


# -- one-click tasks --------------------------------------------------------------------------
def _click_test(obs: Observation, history: list[Turn]) -> Turn:
    return _click(_find(obs, "button"), "There is a single button; I click it.")


def _click_test_2(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r"button (\w+)", obs.instruction)
    if not match:
        raise SolverError(f"cannot tell which button from {obs.instruction!r}")
    label = match.group(1)
    target = _find(obs, "button", label)
    # The buttons are placed at random and may overlap; a later element is drawn on top.
    later = obs.elements[obs.elements.index(target) + 1 :]
    point = _free_point(target, later)
    if point is None:
        raise SolverError(f"button {label} is completely covered")
    thought = f"The instruction asks for button {label}; I click a part of it that is not covered."
    if point == (target.x, target.y):
        thought = f"The instruction asks for button {label}; I click it."
    return _turn(thought, Action("click", {"x": point[0], "y": point[1]}))


def _inside(element: Element, x: int, y: int) -> bool:
    return abs(x - element.x) * 2 < element.width and abs(y - element.y) * 2 < element.height


def _free_point(target: Element, covers: list[Element]) -> tuple[int, int] | None:
    """The point of ``target`` nearest its centre that none of ``covers`` hides (3 px margin)."""
    half_w, half_h = max(target.width // 2 - 3, 0), max(target.height // 2 - 3, 0)
    candidates = [
        (target.x + dx, target.y + dy)
        for dx in range(-half_w, half_w + 1)
        for dy in range(-half_h, half_h + 1)
    ]
    candidates.sort(key=lambda p: (p[0] - target.x) ** 2 + (p[1] - target.y) ** 2)
    for x, y in candidates:
        if not any(_inside(cover, x + ox, y + oy) for cover in covers for ox in (-2, 0, 2) for oy in (-2, 0, 2)):
            return x, y
    return None


def _click_button(obs: Observation, history: list[Turn]) -> Turn:
    label = _quoted(obs.instruction)[0]
    return _click(_find(obs, "button", label), f'The instruction asks for the "{label}" button; I click it.')


def _click_link(obs: Observation, history: list[Turn]) -> Turn:
    label = _quoted(obs.instruction)[0]
    return _click(_find(obs, "link", label), f'I need the link "{label}"; I click it.')


def _click_dialog(obs: Observation, history: list[Turn]) -> Turn:
    for element in _of_role(obs, "button"):
        if element.text.strip().lower() in ("close", "x", "\u00d7"):
            return _click(element, "The dialog's x is its Close button; I click it.")
    raise SolverError("no close button on the dialog")


def _click_tab(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r"Tab #\d+", obs.instruction)
    if not match:
        raise SolverError(f"cannot tell which tab from {obs.instruction!r}")
    return _click(_find(obs, "tab", match.group()), f"I click on {match.group()} as asked.")


def _focus_text(obs: Observation, history: list[Turn]) -> Turn:
    return _click(_find(obs, "textbox"), "I click into the textbox to focus it.")


_ORDINALS = {"1st": 0, "2nd": 1, "3rd": 2, "4th": 3, "5th": 4}


def _focus_text_2(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r"(\d+(?:st|nd|rd|th))", obs.instruction)
    boxes = _of_role(obs, "textbox")
    if not match or match.group(1) not in _ORDINALS or _ORDINALS[match.group(1)] >= len(boxes):
        raise SolverError(f"cannot tell which textbox from {obs.instruction!r}")
    index = _ORDINALS[match.group(1)]
    return _click(boxes[index], f"The {match.group(1)} textbox from the top is the one; I click into it.")


# -- selections -------------------------------------------------------------------------------
def _selection_names(instruction: str) -> list[str]:
    match = re.search(r"Select (.*) and click Submit", instruction)
    if not match:
        raise SolverError(f"cannot read what to select from {instruction!r}")
    names = match.group(1).strip()
    return [] if names == "nothing" else [name.strip() for name in names.split(",") if name.strip()]


def _click_checkboxes(obs: Observation, history: list[Turn]) -> Turn:
    wanted = _selection_names(obs.instruction)
    for box in _of_role(obs, "checkbox"):
        if box.text.strip() in wanted and not box.checked:
            return _click(box, f'"{box.text.strip()}" should be ticked and is not; I tick it.')
        if box.text.strip() not in wanted and box.checked:
            return _click(box, f'"{box.text.strip()}" should not be ticked; I untick it.')
    return _click(_find(obs, "button", "Submit"), "The right boxes are ticked; I click Submit.")


def _click_option(obs: Observation, history: list[Turn]) -> Turn:
    wanted = _selection_names(obs.instruction)
    if len(wanted) != 1:
        raise SolverError(f"expected one option in {obs.instruction!r}")
    option = _find(obs, "radio", wanted[0])
    if not option.checked:
        return _click(option, f'I select the option "{wanted[0]}".')
    return _click(_find(obs, "button", "Submit"), f'"{wanted[0]}" is selected; I click Submit.')


# -- forms ------------------------------------------------------------------------------------
def _fill(obs: Observation, fields: list[tuple[Element, str, str]], submit: Element) -> Turn:
    """Fill each (field, value, name) in order, then press ``submit``.

    A field counts as filled when its shown text equals the value (a password field shows one
    ``*`` a character). An unfocused field is clicked first; a focused one with the wrong text is
    cleared with ctrl+a (the typing then replaces the selection).
    """
    for field, value, name in fields:
        shown = "*" * len(value) if field.role == "password" else value
        if field.text == shown:
            continue
        if not field.focused:
            return _click(field, f"I click into the {name} field.")
        if field.text:
            return _turn(f"The {name} field has other text; I select it all to replace it.",
                         Action("hotkey", {"keys": "ctrl+a"}))
        return _turn(f'The {name} field is focused; I type "{value}".', Action("type", {"text": value}))
    return _click(submit, f'Everything is filled in; I press "{submit.text.strip()}".')


def _field_after(obs: Observation, label: str, roles: tuple[str, ...]) -> Element:
    """The first field of ``roles`` that follows the text element ``label`` (forms list label, field)."""
    seen = False
    for element in obs.elements:
        if element.role == "text" and element.text.strip().lower() == label.lower():
            seen = True
        elif seen and element.role in roles:
            return element
    raise SolverError(f"no field after the label {label!r}")


def _enter_text(obs: Observation, history: list[Turn]) -> Turn:
    value = _quoted(obs.instruction)[0]
    return _fill(obs, [(_find(obs, "textbox"), value, "text")], _find(obs, "button", "Submit"))


def _enter_password(obs: Observation, history: list[Turn]) -> Turn:
    value = _quoted(obs.instruction)[0]
    boxes = _of_role(obs, "password")
    if len(boxes) != 2:
        raise SolverError(f"expected two password fields, found {len(boxes)}")
    fields = [(boxes[0], value, "password"), (boxes[1], value, "verify password")]
    return _fill(obs, fields, _find(obs, "button", "Submit"))


def _login_user(obs: Observation, history: list[Turn]) -> Turn:
    user, password = _quoted(obs.instruction)[:2]
    fields = [
        (_field_after(obs, "Username", ("textbox",)), user, "username"),
        (_field_after(obs, "Password", ("password", "textbox")), password, "password"),
    ]
    return _fill(obs, fields, _find(obs, "button", "Login"))


SOLVERS: dict[str, Solver] = {
    "click-test": _click_test,
    "click-test-2": _click_test_2,
    "click-button": _click_button,
    "click-link": _click_link,
    "click-dialog": _click_dialog,
    "click-tab": _click_tab,
    "click-checkboxes": _click_checkboxes,
    "click-option": _click_option,
    "focus-text": _focus_text,
    "focus-text-2": _focus_text_2,
    "enter-text": _enter_text,
    "enter-password": _enter_password,
    "login-user": _login_user,
}


# -- terminal tasks ---------------------------------------------------------------------------
def _terminal(command: str, obs: Observation) -> Turn:
    """Type ``command`` on an empty command line, run it with enter; clear a line that differs."""
    last = obs.screen_text.splitlines()[-1] if obs.screen_text else "$ "
    typed = last[2:] if last.startswith("$ ") else last
    if typed == command:
        return _turn("The command is typed; I press enter to run it.", Action("hotkey", {"keys": "enter"}))
    if typed:
        return _turn("The command line holds something else; I clear it.", Action("hotkey", {"keys": "ctrl+u"}))
    return _turn(f"I type the command: {command}", Action("type", {"text": command}))


def _terminal_hello(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r'file named (\S+) that contains the word "([^"]+)"', obs.instruction)
    if not match:
        raise SolverError(f"cannot read the file and word from {obs.instruction!r}")
    return _terminal(f"echo {match.group(2)} > {match.group(1)}", obs)


def _terminal_mkdir(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r"directory named (\S+) holding an empty file named (\S+?)\.?$", obs.instruction)
    if not match:
        raise SolverError(f"cannot read the directory and file from {obs.instruction!r}")
    folder, file = match.groups()
    return _terminal(f"mkdir -p {folder} && touch {folder}/{file}", obs)


def _terminal_count(obs: Observation, history: list[Turn]) -> Turn:
    match = re.search(r"lines in (\S+) into (\S+?)\.?$", obs.instruction)
    if not match:
        raise SolverError(f"cannot read the files from {obs.instruction!r}")
    return _terminal(f"wc -l < {match.group(1)} > {match.group(2)}", obs)


SOLVERS.update({
    "terminal-hello": _terminal_hello,
    "terminal-mkdir": _terminal_mkdir,
    "terminal-count": _terminal_count,
})


def solve_step(task: str, observation: Observation, history: list[Turn]) -> Turn:
    """The scripted next turn for ``task``. Raises ``SolverError`` if the screen lacks its target."""
    solver = SOLVERS.get(task)
    # the web app's and the desktop's solutions load with their env packages (the desktop's: python-xlib), which
    # a miniwob or terminal solver must not pay for
    if solver is None and task.startswith(("shop-", "wiki-")):
        from agent.envs.webapp.solutions import SOLUTIONS as WEBAPP_SOLUTIONS, solve_step as webapp_step

        if task in WEBAPP_SOLUTIONS:
            return webapp_step(task, observation, history)
    if solver is None and task.startswith("desktop-"):
        from agent.envs.desktop.solutions import SOLUTIONS, solve_step as desktop_step

        if task in SOLUTIONS:
            return desktop_step(task, observation, history)
    if solver is None:
        raise SolverError(f"no scripted solver for task {task!r}")
    try:
        return solver(observation, history)
    except IndexError as exc:  # e.g. no quoted value in the instruction
        raise SolverError(f"{task}: cannot read the instruction {observation.instruction!r}") from exc
