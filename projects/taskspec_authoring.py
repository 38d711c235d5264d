"""Authored tasks: a desktop or webapp task written as its own JSON (an OSWorld task, a WebArena task or an any-URL
task), checked by the env's own loader, and files of them imported and exported.

A TaskSpec with ``definition`` null is a shipped task, looked up by name in its env's registry; one with a
definition carries the JSON the rollout worker hands to the env (``env.add_task``) before the episode. The
definition's id (``id`` / ``task_id``) is the task's name; it may not be a shipped task's id unless the JSON is that
shipped task's own (then it is stored as the shipped task, so an export imports back unchanged)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent.envs import ENV_KINDS, tasks_for
from agent.envs.desktop import DESKTOP_TASKS, osworld
from agent.envs.desktop.env import MAX_STEPS as DESKTOP_MAX_STEPS
from agent.envs.desktop.osworld import TaskFormatError, missing_files, missing_programs
from agent.envs.webapp import WEBAPP_TASKS
from agent.envs.webapp import tasks as webapp_tasks
from core.errors import ApplicationError
from core.limits import LIMITS, too_long
from projects.models import Project
from projects.taskspec_files import files_for_env

MAX_IMPORT = 500
# A task id is a slug: lowercase ASCII letters, digits, '-' and '_'. It names the task in lists, exports, file
# names and the model's prompt history; other letters (non-Latin scripts included) and markup are refused, not
# rewritten, so the id a person wrote is the id stored. Shipped ids, OSWorld's UUIDs and WebArena's numbers fit.
TASK_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
TASK_ID_RULE = "lowercase letters a-z, digits, '-' and '_', starting with a letter or a digit"


@dataclass(frozen=True)
class Definition:
    """What flywheel needs of a loaded definition."""

    task_id: str
    instruction: str
    max_steps: int


class AuthoredKind:
    """An env kind whose tasks can be written as JSON: its file format, its loader and its shipped tasks' JSON."""

    kind = ""
    format = ""  # the import / export format's name
    label = ""
    id_key = ""  # the JSON key of the task's id
    instruction_keys: tuple[str, ...] = ()  # the JSON keys its instruction may be under

    def load(self, data: Any, origin: str) -> Definition:  # raises the loader's TaskFormatError (a ValueError)
        raise NotImplementedError

    def shipped(self) -> dict[str, dict]:
        """Shipped task id -> the task's JSON as its file holds it."""
        raise NotImplementedError


class DesktopKind(AuthoredKind):
    kind, format, label = "desktop", "osworld", "OSWorld"
    id_key, instruction_keys = "id", ("instruction",)

    def load(self, data: Any, origin: str) -> Definition:
        task = osworld.load_task(data, origin=origin)
        return Definition(task.id, task.instruction, DESKTOP_MAX_STEPS)  # OSWorld tasks carry no step limit

    def shipped(self) -> dict[str, dict]:
        return {task_id: task.raw for task_id, task in DESKTOP_TASKS.items()}


class WebAppKind(AuthoredKind):
    kind, format, label = "webapp", "webarena", "WebArena"
    id_key, instruction_keys = "task_id", ("intent", "instruction")

    def load(self, data: Any, origin: str) -> Definition:
        task = webapp_tasks.load_task(data, origin=origin)
        return Definition(task.task_id, task.intent, task.max_steps)

    def shipped(self) -> dict[str, dict]:
        return {task_id: task.raw for task_id, task in WEBAPP_TASKS.items()}


AUTHORED: dict[str, AuthoredKind] = {k.kind: k for k in (DesktopKind(), WebAppKind())}
FORMATS: dict[str, AuthoredKind] = {k.format: k for k in AUTHORED.values()}


def authored_kind(env_kind: str) -> AuthoredKind:
    if env_kind not in ENV_KINDS:
        message = f"Unknown environment kind '{env_kind}'; use one of {', '.join(ENV_KINDS)}."
        raise ApplicationError(message, errors={"env_kind": [message]})
    if env_kind not in AUTHORED:
        message = (f"{env_kind} tasks cannot be written as JSON; choose one from the shipped list. Desktop (OSWorld) "
                   "and webapp (WebArena or any-URL) tasks can be.")
        raise ApplicationError(message, errors={"definition": [message]})
    return AUTHORED[env_kind]


def format_kind(name: str) -> AuthoredKind:
    if name not in FORMATS:
        message = (f"Unknown task format '{name}'; use {' or '.join(FORMATS)}." if name else
                   f"Say which format the tasks are in: {' or '.join(FORMATS)}.")
        raise ApplicationError(message, errors={"format": [message]})
    return FORMATS[name]


def task_id_problem(task_id: str) -> str:
    """What is wrong with ``task_id`` as a task's id, or "" when it is a fine one."""
    if not task_id:
        return "The task id is empty; give the task an id such as settings-notifications-off."
    shown = task_id if len(task_id) <= 60 else f"{task_id[:60]}…"
    if len(task_id) > LIMITS["task_id"]:
        return f"The task id '{shown}' is {len(task_id):,} characters long; the limit is {LIMITS['task_id']}."
    if not TASK_ID.fullmatch(task_id):
        return f"The task id '{shown}' may hold only {TASK_ID_RULE} (like settings-notifications-off)."
    return ""


def _own_problems(authored: AuthoredKind, definition: Any) -> list[str]:
    """The problems of ``definition`` that Loupe adds to its loader's: the id's form and the instruction's length,
    read from the raw JSON so that they are listed with the loader's own problem, not only after it is fixed."""
    if not isinstance(definition, dict):
        return []
    problems = []
    raw_id = definition.get(authored.id_key)
    if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id).strip():
        problems.append(task_id_problem(str(raw_id)))
    for key in authored.instruction_keys:
        if isinstance(definition.get(key), str):
            problems.append(too_long("task_instruction", definition[key]))
    return [problem for problem in problems if problem]


def problems_message(problems: list[str]) -> str:
    """The one problem, or all of them numbered."""
    if len(problems) == 1:
        return problems[0]
    return f"{len(problems)} problems; nothing was saved: " + " ".join(f"({n}) {p}" for n, p in enumerate(problems, 1))


def problems_error(problems: list[str], field: str) -> ApplicationError:
    """One ApplicationError listing every problem on ``field``."""
    return ApplicationError(problems_message(problems), errors={field: problems})


def definition_check(*, env_kind: str, definition: Any, origin: str = "") -> tuple[Definition, dict | None]:
    """Load ``definition`` with the env's own loader. Returns what it defines and the JSON to store: None when it is
    a shipped task's own JSON (the task is then the shipped one). ApplicationError listing every problem found on the
    ``definition`` field when it is refused: the id's form, the instruction's length and the loader's message,
    naming what is wrong or unsupported."""
    authored = authored_kind(env_kind)
    where = f"{origin}: " if origin else ""
    problems = [where + problem for problem in _own_problems(authored, definition)]
    try:
        loaded = authored.load(definition, origin)
    except ValueError as exc:  # the loaders' TaskFormatError: names the task, the file and what is wrong (each one)
        raise problems_error([*problems, *getattr(exc, "problems", [str(exc)])], "definition") from None
    except (TypeError, AttributeError, KeyError, IndexError) as exc:  # a value of a type the loader did not expect
        message = (f"{where}the {authored.label} loader cannot read this task: a field holds a value of the wrong "
                   f"type ({exc}).")
        raise problems_error([*problems, message], "definition") from None
    if problems:
        raise problems_error(problems, "definition")
    shipped = authored.shipped()
    if loaded.task_id in shipped:
        if shipped[loaded.task_id] == definition:
            return loaded, None
        message = (f"'{loaded.task_id}' is the id of a shipped {env_kind} task; give your task another id "
                   "(or choose the shipped one from the list).")
        raise ApplicationError(message, errors={"definition": [message]})
    return loaded, definition


def catalogue() -> list[dict]:
    """Each env kind with its shipped tasks (name, description, step limit), and whether and how it is authored."""
    kinds = []
    for kind in ENV_KINDS:
        try:
            registry = tasks_for(kind)
        except Exception as exc:  # noqa: BLE001 - a kind whose registry cannot load (a bad LOUPE_WEBAPP_TASKS_DIR)
            registry, error = {}, str(exc)
        else:
            error = ""
        authored = AUTHORED.get(kind)
        kinds.append({
            "kind": kind, "format": authored.format if authored else None,
            "tasks": [{"name": info.name, "description": info.description, "max_steps": info.max_steps}
                      for info in sorted(registry.values(), key=lambda info: info.name)],
            "error": error,
        })
    return kinds


# -- coverage: what of a folder of OSWorld files would import and run here ---------------------------------------------
@dataclass
class CoverageRow:
    domain: str
    files: int = 0
    importable: int = 0
    runnable: int = 0  # importable, its programs installed, and no file missing from the store
    need_files: int = 0  # importable tasks that download a file
    missing_files: int = 0  # distinct files those tasks need that the store lacks
    programs: dict = None  # program not installed -> tasks that start it
    problems: dict = None  # a refusal's reason -> files refused for it


def osworld_coverage(paths: list, *, project: Project | None = None) -> tuple[list[CoverageRow], list[tuple[str, list]]]:
    """For files of OSWorld tasks (``paths``: files, grouped by their folder's name, OSWorld's domain): per domain, how
    many import, how many would run here now (their programs installed, their files in ``project``'s file store),
    and which files are missing. Returns the rows (a total last) and each refused file with its problems."""
    import collections
    from pathlib import Path

    stored = project_files(project) if project is not None else {}
    rows: dict[str, CoverageRow] = {}
    refused: list[tuple[str, list]] = []
    missing_by_domain: dict[str, set] = collections.defaultdict(set)
    for path in paths:
        path = Path(path)
        row = rows.setdefault(path.parent.name, CoverageRow(path.parent.name, programs={}, problems={}))
        row.files += 1
        try:
            task = osworld.load_task(json.loads(path.read_text()), origin=str(path))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            refused.append((str(path), [f"not a readable JSON file ({exc})"]))
            continue
        except TaskFormatError as exc:
            problems = [p.split("): ", 1)[-1] for p in exc.problems]
            refused.append((str(path), problems))
            for problem in problems:
                reason = re.sub(r" in evaluator.*|; supported: .*| \(.*", "", problem.split(": ", 1)[-1]
                                if problem.startswith(("config step", "evaluator")) else problem)
                row.problems[reason] = row.problems.get(reason, 0) + 1
            continue
        except (TypeError, AttributeError, KeyError, IndexError) as exc:
            refused.append((str(path), [f"a field holds a value of the wrong type ({exc})"]))
            continue
        row.importable += 1
        lacking = missing_programs(task)
        absent = missing_files(task, stored)
        for program in lacking:
            row.programs[program] = row.programs.get(program, 0) + 1
        if task.files:
            row.need_files += 1
        missing_by_domain[row.domain].update((item.url, item.path) for item in absent)
        if not lacking and not absent:
            row.runnable += 1
    ordered = [rows[name] for name in sorted(rows)]
    for row in ordered:
        row.missing_files = len(missing_by_domain[row.domain])
    total = CoverageRow("total", programs={}, problems={})
    for row in ordered:
        for key in ("files", "importable", "runnable", "need_files", "missing_files"):
            setattr(total, key, getattr(total, key) + getattr(row, key))
        for table in ("programs", "problems"):
            for name, count in getattr(row, table).items():
                getattr(total, table)[name] = getattr(total, table).get(name, 0) + count
    return [*ordered, total], refused


def project_files(project: Project) -> dict:
    """The project's file store as the env takes it: ``{(url, path): local file}`` (path "" for any target)."""
    return files_for_env(project=project)
