"""Scripted solutions of the shipped shop tasks: what a person would do, decided from each observation.

A solution is a list of steps (click the element with this text, fill the field after this label, press a
key, answer); ``ScriptedSolution.next_action(observation)`` turns the next step into actions using only
the elements on the screen (the model sees the same), scrolling down when the element is not in view yet.
Tests and demos play them: every shipped task scores 0 before and 1 after its solution.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.actions import Action, Turn, format_turn
from agent.envs.base import Element, Observation

__all__ = ["SOLUTIONS", "Click", "ClickNear", "Fill", "Finish", "Key", "Type", "ScriptedSolution", "SolutionError", "solution_for",
           "solve_step"]

_FIELDS = ("textbox", "password", "select")


class SolutionError(ValueError):
    """The screen does not hold what the next step needs, even after scrolling."""


def _click(element: Element) -> Action:
    return Action("click", {"x": element.x, "y": element.y})


@dataclass(frozen=True)
class Click:
    """Click the element whose text is ``text`` (of ``role`` if given; ``nth`` among several)."""

    text: str
    role: str | None = None
    nth: int = 0
    prefix: bool = False  # the element's text only starts with ``text`` (a text area showing its content)

    def resolve(self, obs: Observation) -> list[Action] | None:
        found = [e for e in obs.elements if (e.text.strip().startswith(self.text) if self.prefix else
                 e.text.strip() == self.text) and (self.role is None or e.role == self.role)]
        return [_click(found[self.nth])] if len(found) > self.nth else None


@dataclass(frozen=True)
class Fill:
    """Click the first field after the text ``label`` (or the ``nth`` text box of the screen if no label),
    select what it holds if anything, and type ``value``."""

    label: str | None
    value: str
    nth: int = 0

    def resolve(self, obs: Observation) -> list[Action] | None:
        elements = obs.elements
        if self.label is None:
            fields = [e for e in elements if e.role == "textbox"]
            field = fields[self.nth] if len(fields) > self.nth else None
        else:
            start = next((i for i, e in enumerate(elements) if e.role == "text" and e.text.strip() == self.label), None)
            field = None if start is None else next((e for e in elements[start + 1:] if e.role in _FIELDS), None)
        if field is None:
            return None
        clear = [Action("hotkey", {"keys": "ctrl+a"})] if field.text else []
        return [_click(field), *clear, Action("type", {"text": self.value})]


@dataclass(frozen=True)
class ClickNear:
    """Click ``(dx, dy)`` pixels from the text ``label``: a control drawn without text, such as a star rating."""

    label: str
    dx: int
    dy: int

    def resolve(self, obs: Observation) -> list[Action] | None:
        found = next((e for e in obs.elements if e.role == "text" and e.text.strip() == self.label), None)
        # (a screen read back from a prompt has no size: height 0)
        if found is None or not 0 <= found.y + self.dy < (obs.height or 720):
            return None
        return [Action("click", {"x": found.x + self.dx, "y": found.y + self.dy})]


@dataclass(frozen=True)
class Key:
    keys: str

    def resolve(self, obs: Observation) -> list[Action] | None:
        return [Action("hotkey", {"keys": self.keys})]


@dataclass(frozen=True)
class Type:
    text: str

    def resolve(self, obs: Observation) -> list[Action] | None:
        return [Action("type", {"text": self.text})]


@dataclass(frozen=True)
class Finish:
    """End the episode; ``answer`` may be read from the screen by a function of the observation."""

    answer: str | Callable[[Observation], str] = ""

    def resolve(self, obs: Observation) -> list[Action] | None:
        answer = self.answer(obs) if callable(self.answer) else self.answer
        return [Action("finished", {"answer": answer})]


class ScriptedSolution:
    """Plays a task's steps one action at a time; scrolls down (up to ``max_scrolls``) to find an element."""

    def __init__(self, steps: list, *, max_scrolls: int = 8, width: int = 1280, height: int = 720) -> None:
        self.steps = list(steps)
        self.pending: list[Action] = []
        self.scrolls, self.max_scrolls = 0, max_scrolls
        self.centre = {"x": width // 2, "y": height // 2}

    def next_action(self, obs: Observation) -> Action:
        if self.pending:
            return self.pending.pop(0)
        if not self.steps:
            raise SolutionError("the solution has no steps left but the episode goes on")
        actions = self.steps[0].resolve(obs)
        if actions is None:
            if self.scrolls >= self.max_scrolls:
                raise SolutionError(f"{self.steps[0]} not found on {obs.url} after {self.scrolls} scrolls")
            self.scrolls += 1
            return Action("scroll", {**self.centre, "direction": "down"})
        self.steps.pop(0)
        self.scrolls = 0
        self.pending = actions[1:]
        return actions[0]


def _text_like(pattern: str) -> Callable[[Observation], str]:
    """The first text on the screen that matches ``pattern`` (a time, a number)."""
    import re

    def read(obs: Observation) -> str:
        return next((e.text.strip() for e in obs.elements if e.role == "text" and re.fullmatch(pattern, e.text.strip())),
                    "")

    return read


def _price_after(title: str) -> Callable[[Observation], str]:
    """The first price shown after the product's title (as a person reads a product page)."""
    def read(obs: Observation) -> str:
        texts = [e.text.strip() for e in obs.elements if e.role == "text"]
        start = max((i for i, t in enumerate(texts) if t == title), default=0)
        return next((t for t in texts[start:] if t.startswith("£")), "")

    return read


SOLUTIONS: dict[str, list] = {
    "shop-add-to-basket": [Click("Bluetooth Speaker", "link"), Click("Add to basket"), Finish()],
    "shop-add-headphones": [Click("Wireless Headphones", "link"), Click("Add to basket"), Finish()],
    "shop-add-radio": [Click("Portable Radio", "link"), Click("Add to basket"), Finish()],
    "shop-add-turntable": [Click("Turntable Classic", "link"), Click("Add to basket"), Finish()],
    "shop-basket-two": [Fill(None, "herb seed"), Key("enter"), Click("Herb Seed Kit", "link"), Click("Add to basket"),
                        Click("Add to basket"), Finish()],
    "shop-price-answer": [Fill(None, "power bank"), Key("enter"), Click("Power Bank 20000", "link"),
                          Finish(_price_after("Power Bank 20000"))],
    "shop-category-url": [Click("Garden", "link"), Finish()],
    "shop-guest-checkout": [
        Fill(None, "wireless mouse"), Key("enter"), Click("Wireless Mouse", "link"), Click("Add to basket"),
        Click("Checkout now"), Fill("My email address is", "guest@example.com"), Click("Continue"),
        Fill("First name", "Alex"), Fill("Last name", "Doe"), Fill("First line of address", "1 High Street"),
        Fill("City", "London"), Fill("Post/Zip-code", "SW1A 1AA"), Click("Continue"),
        Click("Continue"), Click("Place order"), Finish(),
    ],
    "shop-review": [
        Click("Write a review", "link"), Fill("Title", "Great recipes"), ClickNear("Score", 220, 46),
        Fill("Body", "Every dish I tried worked the first time."), Fill("Name", "Alex"),
        Fill("Email", "alex@example.com"), Click("Save review"), Finish(),
    ],
    "shop-admin-rename": [
        Fill("Product title:", "Portable Radio"), Click("Search", "button"), Click("Portable Radio", "link"),
        Fill("Title", "Portable DAB Radio"), Click("Save"), Finish(),
    ],
    "wiki-standup-answer": [Click("Daily standup", "link"), Finish(_text_like(r"\d{1,2}:\d{2}"))],
    "wiki-open-page": [Click("Coffee machine", "link"), Finish()],
    "wiki-edit-page": [Click("Edit", "link"), Click("The coffee machine", "textbox", prefix=True), Key("ctrl+End"),
                       Type("\nUse only filtered water."), Click("Save changes"), Finish()],
    "wiki-create-page": [Fill(None, "Team lunch"), Key("enter"), Click("Team lunch", "link"),
                         Fill(None, "Team lunch is on Thursdays at 12:30."), Click("Save page"), Finish()],
}


def solution_for(task_id: str, **kw: int) -> ScriptedSolution:
    if task_id not in SOLUTIONS:
        raise KeyError(f"no scripted solution for webapp task {task_id!r}")
    return ScriptedSolution(SOLUTIONS[task_id], **kw)


# -- the scripted policy backend: one turn at a time from what the prompt shows --------------------------------
def _tokens(step: object) -> list[tuple]:
    """What a step's actions look like in a history (coordinates aside): Fill always selects before typing here."""
    if isinstance(step, Fill):
        return [("click",), ("hotkey", "ctrl+a"), ("type", step.value)]
    if isinstance(step, Key):
        return [("hotkey", step.keys)]
    if isinstance(step, Type):
        return [("type", step.text)]
    if isinstance(step, Finish):
        return [("finished",)]
    return [("click",)]


def _token(action: Action) -> tuple:
    if action.name in ("type", "hotkey"):
        return (action.name, action.args["text" if action.name == "type" else "keys"])
    return (action.name,)


def _thought(step: object, part: int) -> str:
    if isinstance(step, Fill):
        where = f'the field after "{step.label}"' if step.label else "the search box"
        return [f"I click {where}.", "I select what it holds.", f"I type {step.value!r}."][part]
    if isinstance(step, Click):
        return f'I click "{step.text}".'
    if isinstance(step, ClickNear):
        return f'I click the control near "{step.label}".'
    if isinstance(step, Key):
        return f"I press {step.keys}."
    if isinstance(step, Type):
        return f"I type {step.text.strip()!r}."
    return "The task is done."


def solve_step(task_id: str, observation: Observation, history: list[Turn]) -> Turn:
    """The next turn of ``task_id``'s solution for the ``scripted`` policy backend, which sees only the prompt: the
    screen and the last few turns. Where the solution has got to is read from those turns (scrolls aside): the
    places in the solution that the turns end with, the first whose next step can be done on this screen (its
    element is in view; the typing of a Fill only where a field has the focus); none means a scroll down."""
    if task_id not in SOLUTIONS:
        raise KeyError(f"no scripted solution for webapp task {task_id!r}")
    steps = SOLUTIONS[task_id]
    flat = [(i, part, token) for i, step in enumerate(steps) for part, token in enumerate(_tokens(step))]
    tokens = [token for _, _, token in flat]
    done = [_token(t.action) for t in history if t.action is not None and t.action.name != "scroll"]
    candidates = [0] if not done else []
    for length in range(min(len(done), len(tokens)), 0, -1):
        tail = done[-length:]
        candidates = [p for p in range(length, len(tokens) + 1) if tokens[p - length:p] == tail]
        if candidates:
            break
    candidates = candidates or [0]
    # A scroll was taken because the next step's element was not in view: that step needs an element.
    scrolled = bool(history) and history[-1].action is not None and history[-1].action.name == "scroll"
    for position in candidates:
        if position >= len(tokens):
            continue
        index, part, token = flat[position]
        step = steps[index]
        if scrolled and (part or isinstance(step, (Key, Type, Finish))):
            continue
        if part == 0:
            actions = step.resolve(observation)
            if actions is None:
                continue
            action = actions[0]
        else:  # the rest of a Fill: only where a field has the focus (the click before it landed in one)
            if not any(e.focused and e.role in _FIELDS for e in observation.elements):
                continue
            action = Action("hotkey", {"keys": "ctrl+a"}) if token[0] == "hotkey" else Action("type", {"text": token[1]})
        thought = _thought(step, part)
        return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))
    action = Action("scroll", {"x": observation.width // 2 or 640, "y": observation.height // 2 or 360,
                               "direction": "down"})
    thought = "What I need is not in view; I scroll down."
    return Turn(thought=thought, action=action, void_reason=None, raw=format_turn(thought, action))
