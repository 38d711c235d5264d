"""The records an OSWorld task file becomes (osworld.py reads it), and the problems a reading finds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["OSWorldTask", "Problems", "TaskFile", "TaskFormatError"]


class TaskFormatError(ValueError):
    """A task file that is not valid OSWorld JSON or uses what Loupe does not support. ``problems``: each one found
    (the message holds them all)."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


@dataclass(frozen=True)
class TaskFile:
    """A file a task downloads (a ``download`` step) or compares with (a ``cloud_file`` getter): the project's file
    store holds it, keyed by ``url`` and ``path`` (the VM path a download writes, or a cloud file's ``dest``)."""

    url: str
    path: str
    where: str  # "config step 2 (download)", for a person

    @property
    def name(self) -> str:
        return Path(self.path).name or self.url


@dataclass(frozen=True)
class OSWorldTask:
    id: str
    instruction: str
    config: list[dict]
    evaluator: dict
    infeasible: bool
    origin: str = ""
    hybrid: bool = False  # Loupe's addition ("hybrid": true): the episode may also run shell(command=...)
    raw: dict = field(default_factory=dict, repr=False, compare=False)
    person: bool = False  # an empty evaluator: a person judges the episode
    files: tuple[TaskFile, ...] = ()  # what it downloads, from the project's file store
    programs: tuple[str, ...] = ()  # the programs its setup starts (``runnable`` checks they are installed)

    @property
    def funcs(self) -> list[str]:
        func = self.evaluator.get("func")
        return func if isinstance(func, list) else [func]


class Problems:
    """The problems found in one task; ``add`` keeps going, so a file's problems are all listed at once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        if message not in self.items:
            self.items.append(message)
