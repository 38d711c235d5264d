"""Environments behind one interface; ``make_env("miniwob" | "terminal" | "desktop" | "webapp")`` builds one."""

from __future__ import annotations

from typing import Any

from agent.envs.base import Element, Env, EnvError, Observation, StepResult, TaskInfo

__all__ = ["Element", "Env", "EnvError", "Observation", "StepResult", "TaskInfo", "make_env", "tasks_for"]

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
