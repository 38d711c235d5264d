"""The ``webapp`` env kind: real sites served locally (a django-oscar shop), WebArena-format and any-URL tasks
(see env.py, tasks.py, sites.py)."""

from agent.envs.webapp.env import TASKS, WEBAPP_TASKS, WebAppEnv
from agent.envs.webapp.tasks import TaskFormatError, WebTask, load_task, load_task_file

__all__ = ["TASKS", "WEBAPP_TASKS", "TaskFormatError", "WebAppEnv", "WebTask", "load_task", "load_task_file"]
