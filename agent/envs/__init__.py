"""Environments behind one interface; ``make_env("miniwob" | "terminal" | "desktop" | "webapp")`` builds one."""

from __future__ import annotations

from typing import Any

from agent.envs.base import Element, Env, EnvError, Observation, StepResult, TaskInfo

__all__ = ["Element", "Env", "EnvError", "Observation", "StepResult", "TaskInfo", "add_authored_task", "make_env",
           "tasks_for"]

ENV_KINDS = ("miniwob", "terminal", "desktop", "webapp")


def make_env(kind: str, **kw: Any) -> Env:
    """Build an environment; keyword arguments go to its constructor."""
    if kind == "miniwob":
        from agent.envs.miniwob import MiniWoBEnv  # Playwright is imported only when needed

        return MiniWoBEnv(**kw)
    if kind == "terminal":
        from agent.envs.terminal import TerminalEnv

        return TerminalEnv(**kw)
    if kind == "desktop":
        from agent.envs.desktop import DesktopEnv  # python-xlib and mss are imported only when needed

        return DesktopEnv(**kw)
    if kind == "webapp":
        from agent.envs.webapp import WebAppEnv  # Playwright and the shop's server only when needed

        return WebAppEnv(**kw)
    raise ValueError(f"unknown env kind {kind!r}; expected one of: {', '.join(ENV_KINDS)}")


def tasks_for(kind: str) -> dict[str, TaskInfo]:
    """The task registry of an env kind: task name -> TaskInfo (max_steps, description)."""
    if kind == "miniwob":
        from agent.envs.miniwob import TASKS

        return TASKS
    if kind == "terminal":
        from agent.envs.terminal import TASKS as TERMINAL_TASKS

        return TERMINAL_TASKS
    if kind == "desktop":
        from agent.envs.desktop import TASKS as DESKTOP_TASKS

        return DESKTOP_TASKS
    if kind == "webapp":
        from agent.envs.webapp import TASKS as WEBAPP_TASKS

        return WEBAPP_TASKS
    raise ValueError(f"unknown env kind {kind!r}; expected one of: {', '.join(ENV_KINDS)}")


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
