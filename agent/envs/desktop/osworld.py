"""OSWorld-format tasks: read from their JSON, set up on a desktop, evaluated by getters and metrics.

OSWorld's task format (https://github.com/xlang-ai/OSWorld, ``evaluation_examples``), written here rather than taken
from the ``desktop-env`` package (68 requirements, torch among them). This module reads a task (every problem
at once) and evaluates an episode; each kind it names has one registry in a module of its own: setup steps in
osworld_setup.py, getters in osworld_getters.py, metrics in osworld_metrics.py. The task's records are in
osworld_task.py, the VM's places (its home, the task's files) in osworld_vm.py.

- Loading lists **every** problem of a file (``TaskFormatError.problems``), each naming the step, getter or metric.
- Setup steps (``config`` and ``evaluator.postconfig``, ``SETUP_STEPS``): as OSWorld runs them, a command that exits
  with an error does not stop the setup (its output is kept in ``desktop_notes``); a step that runs past its time
  limit, or hits a limit of the sandbox, ends the setup and names itself. ``download`` copies a file of the
  project's file store (keyed by URL and target path, ``TaskFile``); a task whose files are not there is refused at
  start naming them, never failed half-way. ``googledrive`` and ``login`` (a Google account) are refused with why.
- The VM's home (``/home/user``) and ``~`` map onto the episode's HOME, and a relative path lies in it; files a
  getter reads must lie inside it. Windows paths (``C:\\...``) are refused.
- ``infeasible``: an agent that ends with ``finished(answer="FAIL")`` scores 1, any other end 0; FAIL scores 0 on a
  feasible task (OSWorld's rule). An empty evaluator (``"func": ""``) is a person-judged task: no automatic score
  (``evaluate_task`` returns None), a person decides (the check "person").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.envs.desktop.osworld_getters import GETTERS, REFUSED_GETTERS, get_state
from agent.envs.desktop.osworld_metrics import METRICS, TABLE_RULES, compare_table
from agent.envs.desktop.osworld_setup import REFUSED_STEPS, SETUP_STEPS, run_setup
from agent.envs.desktop.osworld_task import OSWorldTask, Problems, TaskFile, TaskFormatError
from agent.envs.desktop.osworld_vm import CACHE_DIR, find_file
from agent.envs.desktop.programs import program_available

# the names others import from here (flywheel/, bench/, tests/, env.py): the loader's module stays their one door
__all__ = [
    "GETTERS", "METRICS", "SETUP_STEPS", "OSWorldTask", "TaskFile", "TaskFormatError", "evaluate_task", "load_task",
    "load_task_file", "load_tasks_dir", "missing_files", "missing_programs", "run_setup", "FAIL_ANSWERS", "CACHE_DIR",
    "TABLE_RULES", "compare_table", "find_file",
]

FAIL_ANSWERS = ("fail", "infeasible")


# -- loading ---------------------------------------------------------------------------------
def _as_list(value: Any, n: int) -> list:
    if isinstance(value, list):
        return value
    return [value] * n if value is not None else [None] * n


def _check_steps(steps: Any, where: str, problems: Problems, context: dict) -> list[dict]:
    if steps is None:
        return []
    if not isinstance(steps, list):
        problems.add(f"{where} must be a list of steps")
        return []
    for index, step in enumerate(steps):
        label = f"{where} step {index + 1}"
        if not isinstance(step, dict) or "type" not in step:
            problems.add(f"{label}: every step needs a type, got {step!r}")
            continue
        kind = step["type"]
        if kind not in SETUP_STEPS:
            refusal = REFUSED_STEPS.get(kind)
            problems.add(f"{label}: {refusal}" if refusal else
                         f"unsupported setup step {kind!r} in {where}; supported: {', '.join(SETUP_STEPS)}")
            continue
        parameters = step.get("parameters", {})
        if not isinstance(parameters, dict):
            problems.add(f"{label}: {kind} parameters must be an object")
            continue
        spec = SETUP_STEPS[kind]
        missing = [name for name in spec.required if name not in parameters]
        if missing:
            problems.add(f"{label} ({kind}) needs {', '.join(missing)}")
            continue
        spec.check(parameters, f"{label} ({kind})", problems, context)
    return steps


def _check_getter(spec: Any, where: str, problems: Problems, context: dict) -> None:
    if spec is None or spec == {}:
        return
    if not isinstance(spec, dict) or "type" not in spec:
        problems.add(f"{where} must be a getter object with a type, got {spec!r}")
        return
    kind = spec["type"]
    if kind not in GETTERS:
        refusal = REFUSED_GETTERS.get(kind)
        problems.add(f"{where}: {refusal}" if refusal else
                     f"unsupported getter {kind!r} in {where}; supported: {', '.join(GETTERS)}")
        return
    getter = GETTERS[kind]
    missing = [name for name in getter.required if name not in spec]
    if missing:
        problems.add(f"{where}: getter {kind} needs {', '.join(missing)}")
        return
    getter.check(spec, f"{where}: {kind}", problems, context)


def load_task(data: Any, *, origin: str = "", cache_dir: Path = CACHE_DIR) -> OSWorldTask:
    """Validate one OSWorld task object; TaskFormatError lists every problem (what is wrong or unsupported)."""
    label = f"{data.get('id', '?')}" if isinstance(data, dict) else "?"
    head = f"OSWorld task {label}{f' ({origin})' if origin else ''}"
    problems = Problems()

    def refuse() -> TaskFormatError:
        items = problems.items
        message = f"{head}: {items[0]}" if len(items) == 1 else \
            f"{head}: {len(items)} problems: " + " ".join(f"({n}) {p}" for n, p in enumerate(items, 1))
        return TaskFormatError(message, [f"{head}: {p}" for p in items])

    if not isinstance(data, dict):
        problems.add("a task must be a JSON object")
        raise refuse()
    for key in ("id", "instruction", "evaluator"):
        if key not in data:
            problems.add(f"missing {key!r}")
    if "id" in data and (not isinstance(data["id"], str) or not data["id"].strip()):
        problems.add("id must be a non-empty string")
    if "instruction" in data and (not isinstance(data["instruction"], str) or not data["instruction"].strip()):
        problems.add("instruction must be a non-empty string")
    context: dict = {"files": [], "programs": [], "stdout": set(), "cache_dir": Path(cache_dir)}
    config = _check_steps(data.get("config", []), "config", problems, context)
    evaluator = data.get("evaluator")
    person = False
    if "evaluator" in data and (not isinstance(evaluator, dict) or "func" not in evaluator):
        problems.add("evaluator must be an object with a func")
    elif isinstance(evaluator, dict):
        _check_steps(evaluator.get("postconfig", []), "evaluator.postconfig", problems, context)
        person = evaluator["func"] in ("", [], None)
        if not person:
            _check_evaluator(evaluator, problems, context)
    hybrid = data.get("hybrid", False)
    if not isinstance(hybrid, bool):
        problems.add(f"hybrid must be true or false, got {hybrid!r}")
    if problems.items:
        raise refuse()
    funcs = evaluator["func"] if isinstance(evaluator["func"], list) else [evaluator["func"]]
    infeasible = bool(data.get("infeasible", False)) or "infeasible" in funcs
    return OSWorldTask(id=data["id"], instruction=data["instruction"], config=config, evaluator=evaluator,
                       infeasible=infeasible, origin=origin, raw=data, hybrid=hybrid, person=person,
                       files=tuple(dict.fromkeys(context["files"])), programs=tuple(dict.fromkeys(context["programs"])))


def _check_evaluator(evaluator: dict, problems: Problems, context: dict) -> None:
    funcs = evaluator["func"] if isinstance(evaluator["func"], list) else [evaluator["func"]]
    if not all(isinstance(func, str) and func for func in funcs):
        problems.add("evaluator.func must be a metric name or a list of them")
        return
    for func in funcs:
        if func not in METRICS:
            problems.add(f"unsupported metric {func!r}; supported: {', '.join(METRICS)}")
    conj = evaluator.get("conj", "and")
    if conj not in ("and", "or"):
        problems.add(f"evaluator.conj must be 'and' or 'or', got {conj!r}")
    n = len(funcs)
    for key in ("result", "expected", "options"):
        value = evaluator.get(key)
        if isinstance(value, list) and n > 1 and len(value) != n:
            problems.add(f"evaluator.{key} has {len(value)} entries for {n} funcs")
            return
    results = _as_list(evaluator.get("result"), n) if n > 1 else [evaluator.get("result")]
    expecteds = _as_list(evaluator.get("expected"), n) if n > 1 else [evaluator.get("expected")]
    options = _as_list(evaluator.get("options"), n) if n > 1 else [evaluator.get("options")]
    for index, func in enumerate(funcs):
        where = "evaluator" if n == 1 else f"evaluator (func {index + 1}, {func})"
        _check_getter(results[index], f"{where}.result", problems, context)
        _check_getter(expecteds[index], f"{where}.expected", problems, context)
        metric = METRICS.get(func)
        if metric is None:
            continue
        if metric.needs_result and not results[index]:
            problems.add(f"metric {func} needs an evaluator.result getter")
        if metric.needs_expected and not expecteds[index]:
            problems.add(f"metric {func} needs evaluator.expected (a rule getter: {{\"type\": \"rule\", ...}})")
        opts = options[index] or {}
        if not isinstance(opts, dict):
            problems.add(f"{where}.options must be an object")
            continue
        extra = [key for key in opts if metric.options is not None and key not in metric.options]
        if extra:
            problems.add(f"metric {func} takes no option {', '.join(map(repr, extra))}")
        if metric.check is not None:
            metric.check(opts, expecteds[index], f"{where}.options", problems)


def load_task_file(path: str | Path, *, cache_dir: Path = CACHE_DIR) -> OSWorldTask:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskFormatError(f"OSWorld task file {path}: {exc}") from exc
    return load_task(data, origin=str(path), cache_dir=cache_dir)


def load_tasks_dir(folder: str | Path, *, cache_dir: Path = CACHE_DIR) -> dict[str, OSWorldTask]:
    tasks: dict[str, OSWorldTask] = {}
    for path in sorted(Path(folder).glob("*.json")):
        task = load_task_file(path, cache_dir=cache_dir)
        if task.id in tasks:
            raise TaskFormatError(f"OSWorld task id {task.id!r} appears twice ({tasks[task.id].origin}, {path})")
        tasks[task.id] = task
    return tasks


# -- what a task needs -------------------------------------------------------------------------
def missing_programs(task: OSWorldTask) -> list[str]:
    """The programs the task's setup starts that are not installed here (Loupe's stand-ins count: session.py)."""
    return [program for program in task.programs if not program_available(program)]


def missing_files(task: OSWorldTask, files: dict | None) -> list[TaskFile]:
    """The task's files that ``files`` (``{(url, path): local file}``, see ``find_file``) does not hold."""
    return [item for item in task.files if find_file(files or {}, item.url, item.path) is None]


# -- evaluating ------------------------------------------------------------------------------
def evaluate_task(task: OSWorldTask, desktop: Any, *, answer: str | None, files: dict | None = None) -> float | None:
    """Score the episode (0..1): postconfig, then each metric on its getters, combined by conj. ``answer`` is the
    agent's ``finished`` answer, if it ended with one. None for a person-judged task (an empty evaluator)."""
    said_fail = answer is not None and answer.strip().lower() in FAIL_ANSWERS
    if task.person:
        return None
    if task.infeasible:
        return 1.0 if said_fail else 0.0
    if said_fail:
        return 0.0
    evaluator = task.evaluator
    run_setup(evaluator.get("postconfig", []) or [], desktop, files=files, where="postconfig")
    funcs = task.funcs
    n = len(funcs)
    if n == 1:
        results, expecteds = [evaluator.get("result")], [evaluator.get("expected")]
        options = [evaluator.get("options")]
    else:
        results, expecteds = _as_list(evaluator.get("result"), n), _as_list(evaluator.get("expected"), n)
        options = _as_list(evaluator.get("options"), n)
    conj = evaluator.get("conj", "and")
    scores = []
    for func, result_spec, expected_spec, opts in zip(funcs, results, expecteds, options):
        metric = METRICS[func]
        result = get_state(result_spec or None, desktop, files=files)
        expected = get_state(expected_spec or None, desktop, files=files)
        score = metric.score(result, expected, opts or {})
        if conj == "and" and score == 0:
            return 0.0
        scores.append(float(score))
    return max(scores) if conj == "or" else sum(scores) / len(scores)
