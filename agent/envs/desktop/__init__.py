"""The ``desktop`` env kind: a Linux desktop under Xvfb with OSWorld-format tasks (see env.py)."""

from agent.envs.desktop.env import DESKTOP_TASKS, TASKS, DesktopEnv
from agent.envs.desktop.osworld import OSWorldTask, TaskFormatError, load_task, load_task_file

__all__ = ["DESKTOP_TASKS", "TASKS", "DesktopEnv", "OSWorldTask", "TaskFormatError", "load_task", "load_task_file"]
