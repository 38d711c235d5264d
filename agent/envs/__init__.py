"""Environments behind one interface; ``make_env("miniwob" | "terminal" | "desktop" | "webapp")`` builds one."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agent.envs.base import Element, Env, EnvError, Observation, StepResult, TaskInfo

__all__ = ["ENVS", "ENV_KINDS", "Element", "Env", "EnvError", "EnvKind", "Observation", "StepResult", "TaskInfo",
           "add_authored_task", "env_kind", "make_env", "tasks_for"]

@dataclass(frozen=True)
class EnvKind:
    """Where an env kind lives. Its module is imported at first use: Playwright, python-xlib and mss, the shop's
    server are not paid for by a light caller (the trainer's CLI, Django's startup, the env service's checks)."""

    module: str
    env: str  # the Env class in it
    tasks: str = "TASKS"  # its task registry: task name -> TaskInfo

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


# the one table of env kinds: adding a kind is a line here and a module behind Env
ENVS: dict[str, EnvKind] = {
    "miniwob": EnvKind("agent.envs.miniwob", "MiniWoBEnv"),
    "terminal": EnvKind("agent.envs.terminal", "TerminalEnv"),
    "desktop": EnvKind("agent.envs.desktop", "DesktopEnv"),
    "webapp": EnvKind("agent.envs.webapp", "WebAppEnv"),
}
ENV_KINDS = tuple(ENVS)


def env_kind(kind: str) -> EnvKind:
    """The table's entry of ``kind``; ValueError naming the kinds there are."""
    try:
        return ENVS[kind]
    except KeyError:
        raise ValueError(f"unknown env kind {kind!r}; expected one of: {', '.join(ENV_KINDS)}") from None


def make_env(kind: str, **kw: Any) -> Env:
    """Build an environment; keyword arguments go to its constructor."""
    entry = env_kind(kind)
    return getattr(entry.load(), entry.env)(**kw)


def tasks_for(kind: str) -> dict[str, TaskInfo]:
    """The task registry of an env kind: task name -> TaskInfo (max_steps, description)."""
    entry = env_kind(kind)
    return getattr(entry.load(), entry.tasks)


def add_authored_task(env: Env, definition: dict | None, *, files: dict | None = None) -> str | None:
    """Teach ``env`` a task written as its own JSON (an authored task: OSWorld for desktop, WebArena or any-URL for
    webapp), for ``reset`` by its id, which is returned; None for a shipped task (``definition`` None), which the env
    knows by name. The one way the rollout worker, ``trainer eval`` and GRPO's env rewards build an authored task's
    env. EnvError, saying what the env's loader refused, when it cannot take the JSON (a kind that has no authored
    tasks, or the loader's TaskFormatError: e.g. LOUPE_WEBAPP_ALLOWED_HOSTS differ on this machine)."""
    if definition is None:
        return None
    add = getattr(env, "add_task", None)
    if add is None:
        raise EnvError(f"the {env.kind or type(env).__name__} env takes no task written as JSON")
    try:
        return add(definition, files=files) if files else add(definition)
    except ValueError as exc:  # the loaders' TaskFormatError: names the task and what is wrong
        raise EnvError(f"the task's JSON was refused: {exc}") from exc
    except (TypeError, AttributeError, KeyError, IndexError) as exc:  # a field of a type the loader did not expect
        raise EnvError(f"the task's JSON was refused: a field holds a value of the wrong type ({exc})") from exc
