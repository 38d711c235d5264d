"""One environment interface for every kind of screen the agent acts on.

An ``Observation`` is what both the model and the annotator see: a JPEG screenshot, the visible
elements read from the page (role, text, centre in screenshot pixels) and the instruction.
Coordinates in actions are pixels of that screenshot, so an element's ``(x, y)`` can be clicked as is.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from agent.actions import Action

__all__ = ["Element", "Env", "EnvError", "LiveFrame", "Observation", "StepResult", "TaskInfo"]


@dataclass
class Element:
    """A visible element. ``x, y`` is its centre in screenshot pixels."""

    role: str
    text: str
    x: int
    y: int
    width: int
    height: int
    checked: bool | None = None  # checkboxes and radios only
    focused: bool = False

    def to_text(self) -> str:
        text = re.sub(r"\s+", " ", self.text).strip()
        if len(text) > 60:
            text = text[:57] + "..."
        line = f'[{self.role}] "{text}" at ({self.x}, {self.y})'
        if self.checked is not None:
            line += " checked" if self.checked else " unchecked"
        if self.focused:
            line += " focused"
        return line

    def to_dict(self) -> dict:
        return {
            "role": self.role, "text": self.text, "x": self.x, "y": self.y,
            "width": self.width, "height": self.height, "checked": self.checked, "focused": self.focused,
        }


@dataclass
class Observation:
    instruction: str
    url: str
    screenshot: bytes  # JPEG
    width: int
    height: int
    elements: list[Element] = field(default_factory=list)
    screen_text: str = ""  # a text rendering of the screen where there is no DOM (terminal)

    def to_dict(self) -> dict:
        """JSON-safe, without the screenshot bytes (stored apart, as a file)."""
        return {
            "instruction": self.instruction, "url": self.url, "width": self.width, "height": self.height,
            "elements": [element.to_dict() for element in self.elements], "screen_text": self.screen_text,
        }

    def elements_text(self) -> str:
        """The text rendering used in prompts, one element a line."""
        lines = [element.to_text() for element in self.elements]
        if self.screen_text:
            lines.append(self.screen_text)
        return "\n".join(lines)


@dataclass
class StepResult:
    observation: Observation
    reward: float
    done: bool
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TaskInfo:
    """What a registry knows about a task: the step budget a rollout should give it."""

    name: str
    max_steps: int
    description: str = ""


@dataclass(frozen=True)
class LiveFrame:
    """The screen as it is now, for people watching a live episode (never stored, never shown to the model).
    ``width, height`` are the env's screen, whose pixels actions name, whatever size the JPEG itself is."""

    jpeg: bytes
    width: int
    height: int


class EnvError(RuntimeError):
    """The environment itself failed (browser crashed, page never ready); the message says how."""


class SandboxUnavailable(EnvError):
    """No sandbox can be made on this machine; the message says why and what would allow one (agent/envs/sandbox.py:
    an env that must run confined refuses to start)."""


class Env(ABC):
    """An environment runs one episode at a time; ``reset`` starts a new seeded episode."""

    kind: str = ""

    @abstractmethod
    def reset(self, task: str, seed: int) -> Observation: ...

    @abstractmethod
    def step(self, action: Action) -> StepResult: ...

    @abstractmethod
    def close(self) -> None: ...

    def evaluate(self, *, answer: str | None = None) -> float | None:
        """The task's own check on the screen as it is now (0..1), as if the episode finished here with ``answer``:
        what a person's Finish is scored by. None where a judge or a person decides, or the env has no check."""
        return None

    def live_frame(self) -> LiveFrame | None:
        """The newest picture of the screen, for the live view while a person decides or acts (call it from the
        thread that runs the env; a few times a second). None where the env has no screen to stream (a terminal)
        or no picture yet."""
        return None

    def live_stop(self) -> None:
        """The live view pauses (a step runs now): stop producing frames until ``live_frame`` is called again."""

    def __enter__(self) -> Env:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
