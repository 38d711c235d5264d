"""OSWorld-format tasks: read from their JSON, set up on a desktop, evaluated by getters and metrics.

OSWorld's task format (https://github.com/xlang-ai/OSWorld, ``evaluation_examples``), written here rather than taken
from the ``desktop-env`` package (68 requirements, torch among them). This module reads a task and runs its setup
steps; the getters are in osworld_getters.py, the metrics in osworld_metrics.py, each kind in one registry.

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
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError

__all__ = [
    "GETTERS", "METRICS", "SETUP_STEPS", "OSWorldTask", "TaskFile", "TaskFormatError", "evaluate_task", "load_task",
    "load_task_file", "load_tasks_dir", "run_setup", "FAIL_ANSWERS", "CACHE_DIR", "TABLE_RULES", "compare_table",
]

VM_HOME = "/home/user"
FAIL_ANSWERS = ("fail", "infeasible")
CACHE_DIR = Path(__file__).with_name("cache")
SETUP_TIMEOUT_S = 30.0


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


# -- loading ---------------------------------------------------------------------------------
class Problems:
    """The problems found in one task; ``add`` keeps going, so a file's problems are all listed at once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, message: str) -> None:
        if message not in self.items:
            self.items.append(message)


def _as_list(value: Any, n: int) -> list:
    if isinstance(value, list):
        return value
    return [value] * n if value is not None else [None] * n


def home_path(path: Any) -> str | None:
    """``path`` as a VM path in the home (``/home/user/...``), or None when it lies elsewhere. A relative path is
    OSWorld's server's working folder, the home."""
    if not isinstance(path, str) or not path or "\\" in path or (len(path) > 1 and path[1] == ":"):
        return None
    if path == VM_HOME or path.startswith(VM_HOME + "/"):
        return path
    if path == "~" or path.startswith("~/"):
        return VM_HOME + path[1:]
    if not path.startswith("/"):
        return f"{VM_HOME}/{path}"
    return None


def check_home_path(path: Any, where: str, problems: Problems) -> None:
    if home_path(path) is None:
        windows = isinstance(path, str) and ("\\" in path or (len(path) > 1 and path[1] == ":"))
        problems.add(f"{where}: path {path!r} " + ("is a Windows path; this desktop is Linux" if windows else
                                                   f"must lie in the VM's home ({VM_HOME}/... or ~/...)"))


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
    from agent.envs.desktop.session import program_available

    return [program for program in task.programs if not program_available(program)]


def missing_files(task: OSWorldTask, files: dict | None) -> list[TaskFile]:
    """The task's files that ``files`` (``{(url, path): local file}``, see ``find_file``) does not hold."""
    return [item for item in task.files if find_file(files or {}, item.url, item.path) is None]


def find_file(files: dict, url: str, path: str) -> str | None:
    """The local copy of the file at ``url`` for ``path``: the store's entry for that target path, else its entry
    for any path (``(url, "")``)."""
    found = files.get((url, path)) or files.get((url, ""))
    return str(found) if found else None


# -- running on a desktop --------------------------------------------------------------------
def map_home(value: Any, home: Path) -> Any:
    """Every ``/home/user`` and leading ``~/`` in a (nested) value, rewritten onto ``home``."""
    if isinstance(value, str):
        mapped = value.replace(VM_HOME, str(home))
        return str(home) + mapped[1:] if mapped.startswith("~/") else mapped
    if isinstance(value, list):
        return [map_home(item, home) for item in value]
    if isinstance(value, dict):
        return {key: map_home(item, home) for key, item in value.items()}
    return value


def local_path(path: str, home: Path) -> Path:
    """A VM path of the home (or a relative one) as the episode's file; EnvError when it lies outside the home."""
    vm = home_path(path) if not path.startswith(str(home)) else path
    if vm is None:
        raise EnvError(f"{path} lies outside the VM's home; the env will not touch it")
    resolved = Path(map_home(vm, home)).resolve()
    if resolved != home.resolve() and home.resolve() not in resolved.parents:
        raise EnvError(f"{path} resolves outside the episode's home ({resolved}); the env will not touch it")
    return resolved


def run_setup(steps: list[dict], desktop: Any, *, window_timeout_s: float = SETUP_TIMEOUT_S,
              files: dict | None = None, where: str = "setup") -> None:
    """Run setup steps in order; EnvError names the step that failed (ran past its limit, hit a sandbox limit, a
    window that never came) and why. A command that exits with an error goes on, as in OSWorld (noted on the
    desktop: ``desktop.notes``)."""
    assert desktop.home is not None
    run = SetupRun(desktop=desktop, window_timeout_s=window_timeout_s, files=files or {})
    for index, step in enumerate(steps):
        kind, parameters = step["type"], step.get("parameters", {})
        label = f"{where} step {index + 1} ({kind})"
        try:
            SETUP_STEPS[kind].run(run, parameters, label)
        except EnvError as exc:
            message = str(exc)
            raise EnvError(message if message.startswith(label) else f"{label}: {message}") from None


def _what(parameters: dict) -> str:
    """A step's command, briefly, for the messages that name the step."""
    value = parameters.get("command")
    text = value if isinstance(value, str) else shlex.join(map(str, value)) if isinstance(value, list) else str(value)
    text = " ".join(text.split())
    return repr(text if len(text) <= 80 else text[:77] + "...")


@dataclass
class SetupRun:
    """What setup steps share while they run."""

    desktop: Any
    window_timeout_s: float
    files: dict

    def note(self, message: str) -> None:
        notes = getattr(self.desktop, "notes", None)
        if notes is not None:
            notes.append(message)

    @property
    def cache(self) -> Path:
        """The episode's cache folder (an execute step's ``stdout`` file, read by the ``cache_file`` getter)."""
        return episode_cache(self.desktop)


def episode_cache(desktop: Any) -> Path:
    folder = Path(desktop.runtime) / "osworld-cache"
    folder.mkdir(exist_ok=True)
    return folder


@dataclass(frozen=True)
class StepKind:
    required: tuple[str, ...]
    run: Callable[[SetupRun, dict, str], None]
    check: Callable[[dict, str, Problems, dict], None] = lambda parameters, where, problems, context: None


def _check_command(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    command = parameters["command"]
    if not command or not (isinstance(command, str) or (isinstance(command, list) and all(
            isinstance(part, (str, int, float)) for part in command))):
        problems.add(f"{where}: command must be a string or a list of strings")
        return
    for key in ("stdout", "stderr"):
        name = parameters.get(key)
        if name:
            if not isinstance(name, str) or "/" in name or name.startswith("."):
                problems.add(f"{where}: {key} must be a file name, got {name!r}")
            else:
                context["stdout"].add(name)


def _check_launch(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    _check_command(parameters, where, problems, context)
    program = _program(parameters["command"], bool(parameters.get("shell")))
    if program:
        context["programs"].append(program)


def _program(command: Any, shell: bool) -> str:
    """The program a launch starts (its first word), "" when a shell line says more than one."""
    try:
        words = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    except ValueError:
        return ""
    if not words or (shell and any(char in command for char in ";&|") if isinstance(command, str) else False):
        return ""
    return Path(words[0]).name if words[0].startswith("/usr/bin/") else words[0]


def as_argv(command: Any, shell: bool) -> list[str]:
    """A task's command as the argv OSWorld's VM runs: a shell line through /bin/sh (Python's ``shell=True``: dash,
    whose ``echo -e`` prints "-e", as on the VM), else the words (a string split as a shell would)."""
    if shell:
        return ["/bin/sh", "-c", command if isinstance(command, str) else shlex.join(map(str, command))]
    return shlex.split(command) if isinstance(command, str) else [str(part) for part in command]


def _run_command(run: SetupRun, parameters: dict, where: str) -> None:
    command = as_argv(map_home(parameters["command"], run.desktop.home), bool(parameters.get("shell", False)))
    timeout = float(parameters.get("timeout", SETUP_TIMEOUT_S))
    until = parameters.get("until") or {}
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = run.desktop.run(command, timeout_s=max(1.0, deadline - time.monotonic()))
        except EnvError as exc:  # it ran over its time (and maybe hit a limit: the message says)
            rest = str(exc).split(" and was stopped", 1)[-1]  # "; it hit its process limit ..." where it did
            raise EnvError(f"{where}: {_what(parameters)} ran over {timeout} s and was stopped{rest}") from None
        for key in ("stdout", "stderr"):
            if parameters.get(key):
                (run.cache / parameters[key]).write_text(result.stdout if key == "stdout" else result.stderr)
        breach = run.desktop.breach()
        if breach:  # a limit of the sandbox it hit (a fork bomb's parent may have exited 0): the episode fails
            raise EnvError(f"{where}: {_what(parameters)} exited with code {result.returncode} ({breach}): "
                           f"{(result.stderr or result.stdout).strip()[-300:]}")
        if result.returncode != 0:
            run.note(f"{where}: {_what(parameters)} exited with code {result.returncode}: "
                     f"{(result.stderr or result.stdout).strip()[-200:]}")
        done = not until or ("returncode" in until and result.returncode == until["returncode"]) or (
            "stdout" in until and until["stdout"] in result.stdout) or (
            "stderr" in until and until["stderr"] in result.stderr)
        if done:
            return
        if time.monotonic() > deadline:
            raise EnvError(f"{where}: its 'until' condition {until!r} did not hold in {timeout:g} s")
        time.sleep(0.3)


# programs that open no window: a launch of one starts it and goes on (OSWorld waits for nothing)
WINDOWLESS = {"socat", "pkill", "killall", "kill", "nohup", "sleep-forever", "true", "timedatectl"}


def _run_launch(run: SetupRun, parameters: dict, where: str) -> None:
    shell = bool(parameters.get("shell", False))
    command = as_argv(map_home(parameters["command"], run.desktop.home), shell)
    if _program(parameters["command"], shell) in WINDOWLESS:
        process = run.desktop.popen(command, log=f"launch-{int(time.monotonic() * 1000)}.log")
        time.sleep(0.2)
        if process.poll() not in (None, 0):
            run.note(f"{where}: {_what(parameters)} exited with code {process.returncode}")
        return
    _launch(run.desktop, command, shell=False, where=where, timeout_s=run.window_timeout_s)


# what ``open`` starts for a file, by its extension (OSWorld's VM opens it with GNOME's default app)
OPENERS: dict[str, list[str]] = {
    **dict.fromkeys((".xlsx", ".xls", ".ods", ".csv", ".docx", ".doc", ".odt", ".pptx", ".ppt", ".odp", ".rtf"),
                    ["libreoffice"]),
    **dict.fromkeys((".mp3", ".mp4", ".wav", ".avi", ".mkv", ".webm", ".ogg", ".flac"), ["vlc"]),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff", ".xcf"), ["gimp"]),
    ".pdf": ["evince"], ".html": ["chromium"],
}


def opener(path: str) -> list[str]:
    """The app ``open`` starts for the file (GNOME's Document Viewer for a PDF, as on the VM; Chromium without it)."""
    argv = OPENERS.get(Path(path).suffix.lower(), ["mousepad"])
    return ["chromium"] if argv == ["evince"] and shutil.which("evince") is None else argv


def _check_open(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    check_home_path(parameters["path"], where, problems)
    if home_path(parameters["path"]) is not None and Path(parameters["path"]).suffix:
        context["programs"].append(opener(parameters["path"])[0])


def _run_open(run: SetupRun, parameters: dict, where: str) -> None:
    path = local_path(parameters["path"], run.desktop.home)
    if path.is_dir():
        argv = ["pcmanfm", str(path)]
    elif not path.exists():
        raise EnvError(f"{where}: there is no {parameters['path']} to open")
    else:
        argv = [*opener(str(path)), str(path)]
    _launch(run.desktop, argv, shell=False, where=where, timeout_s=run.window_timeout_s)
    # the app's first window may be a splash or a frame still loading: wait for the one that shows the file
    deadline = time.monotonic() + run.window_timeout_s
    while not any(path.name in window.title for window in run.desktop.windows()):
        if time.monotonic() > deadline:
            run.note(f"{where}: no window shows {path.name} after {run.window_timeout_s:g} s")
            return
        time.sleep(0.1)


def _run_sleep(run: SetupRun, parameters: dict, where: str) -> None:
    time.sleep(min(float(parameters["seconds"]), 60.0))


def _check_sleep(parameters: dict, where: str, problems: Problems, context: dict) -> None:
    if isinstance(parameters["seconds"], bool) or not isinstance(parameters["seconds"], (int, float)) \
            or parameters["seconds"] < 0:
        problems.add(f"{where}: seconds must be a number of seconds, got {parameters['seconds']!r}")


def _check_files(parameters: dict, where: str, problems: Problems, context: dict, *, key: str) -> None:
    files = parameters["files"]
    if not isinstance(files, list) or not files or not all(
            isinstance(item, dict) and {key, "path"} <= set(item) for item in files):
        problems.add(f"{where}: files must be a list of {{\"{key}\", \"path\"}} objects")
        return
    for item in files:
        check_home_path(item["path"], where, problems)
        if key == "url":
            if not isinstance(item["url"], str) or not item["url"]:
                problems.add(f"{where}: a file's url must be a non-empty string")
            elif home_path(item["path"]) is not None:
                context["files"].append(TaskFile(item["url"], home_path(item["path"]), where))
        else:
            path = (context["cache_dir"] / str(item[key])).resolve()
            if context["cache_dir"].resolve() not in path.parents or not path.is_file():
                problems.add(f"{where}: no file {item[key]!r} in the local cache ({context['cache_dir']})")


def _run_download(run: SetupRun, parameters: dict, where: str) -> None:
    for item in parameters["files"]:
        vm_path = home_path(item["path"])
        source = find_file(run.files, item["url"], vm_path)
        if source is None:  # refused at start; here only when an env is driven by hand
            raise EnvError(f"{where}: the file {Path(vm_path).name} ({item['url'][:80]}) is not in the project's "
                           "file store; upload it on the Tasks page")
        _upload(run.desktop, Path(source), local_path(vm_path, run.desktop.home), where)


def _run_upload(run: SetupRun, parameters: dict, where: str) -> None:
    for item in parameters["files"]:
        _upload(run.desktop, (CACHE_DIR / item["local_path"]).resolve() if not Path(item["local_path"]).is_absolute()
                else Path(item["local_path"]), local_path(item["path"], run.desktop.home), where)


def _upload(desktop: Any, source: Path, target: Path, where: str) -> None:
    """Copy a file into the episode's HOME, owned by the session's uid (folders made as needed)."""
    home = Path(desktop.home).resolve()
    if target != home and home not in target.parents:
        raise EnvError(f"{where}: {target} lies outside the episode's home")
    result = desktop.run(["mkdir", "-p", str(target.parent)])
    if result.returncode != 0:
        raise EnvError(f"{where}: could not make {target.parent}: {result.stderr.strip()}")
    try:
        shutil.copyfile(source, target)
        if os.geteuid() == 0:
            os.chown(target, desktop.uid, desktop.uid)
    except OSError as exc:
        raise EnvError(f"{where}: could not copy {source.name} to {target}: {exc}") from exc


# an app's window that comes before its own (a splash, a frame still loading): a launch waits on for the app's
SPLASHES = {"GIMP Startup", "LibreOffice"}


def _launch(desktop: Any, argv: list[str] | str, *, shell: bool, where: str, timeout_s: float) -> None:
    """Start an app and wait for its window: a new top-level window, or the process handing its
    request to a running instance and leaving with code 0."""
    before = {window.id for window in desktop.windows()}
    log = f"launch-{int(time.monotonic() * 1000)}.log"
    process = desktop.popen(argv, shell=shell, log=log)
    deadline = time.monotonic() + timeout_s
    untitled_until = None  # a splash or a frame not yet titled (LibreOffice's first): its title is waited for a while
    while time.monotonic() < deadline:
        desktop.check_alive()
        new = [window for window in desktop.windows() if window.id not in before]
        titled = [window for window in new if window.title and window.title not in SPLASHES]
        if new and not titled and untitled_until is None:
            untitled_until = time.monotonic() + 10.0
        if titled or (new and time.monotonic() > untitled_until):
            # a window that never takes the focus (a first-run dialog) holds setup up 3 s at most
            _wait_focus(desktop, (titled or new)[-1], min(deadline, time.monotonic() + 3.0))
            return
        code = process.poll()
        if code is not None:
            if code == 0:
                return
            raise EnvError(f"{where}: {argv!r} exited with code {code} before opening a window: "
                           f"{desktop.log_tail(log) or 'no output'}")
        time.sleep(0.03)
    raise EnvError(f"{where}: {argv!r} opened no window in {timeout_s:g} s")


def _wait_focus(desktop: Any, window: Any, deadline: float) -> None:
    """Wait until the new window holds the keyboard focus: openbox gives it a moment after the window
    maps, and keys typed before then are lost (under load, an agent's first ``type`` went nowhere).
    Ask for the focus once if it has not come after 0.3 s; a window that never takes it is left be."""
    asked_at = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        if desktop.has_focus(window):
            return
        if asked_at and time.monotonic() > asked_at:
            desktop.activate(window)
            asked_at = 0.0
        time.sleep(0.02)


# a window OSWorld's tasks name by its app, and the stand-in's name here (programs.py)
STAND_IN_WINDOWS = {"Google Chrome": "Chromium", "google-chrome": "chromium"}


def _find_window(desktop: Any, parameters: dict, timeout_s: float) -> Any:
    strict = bool(parameters.get("strict", False))
    wanted = [parameters["window_name"]]
    wanted += [stand_in for app, stand_in in STAND_IN_WINDOWS.items() if app in wanted[0]][:1]
    by_class = bool(parameters.get("by_class", False))
    deadline = time.monotonic() + timeout_s
    while True:
        for window in desktop.windows():
            name = window.wm_class if by_class else window.title
            if any((name == w) if strict else (w.lower() in name.lower()) for w in wanted):
                return window
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _run_activate(run: SetupRun, parameters: dict, where: str) -> None:
    window = _find_window(run.desktop, parameters, min(run.window_timeout_s, 10.0))
    if window is None:  # OSWorld goes on too
        titles = ", ".join(repr(w.title) for w in run.desktop.windows()) or "none"
        run.note(f"{where}: no window named {parameters['window_name']!r} (windows: {titles})")
        return
    run.desktop.activate(window)
    time.sleep(0.1)


def _run_close(run: SetupRun, parameters: dict, where: str) -> None:
    window = _find_window(run.desktop, parameters, 2.0)
    if window is None:
        run.note(f"{where}: no window named {parameters['window_name']!r} to close")
        return
    run.desktop.close_window(window)
    time.sleep(0.2)


def _check_urls(key: str) -> Callable[[dict, str, Problems, dict], None]:
    def check(parameters: dict, where: str, problems: Problems, context: dict) -> None:
        urls = parameters[key]
        if not isinstance(urls, list) or not all(isinstance(url, str) and url for url in urls):
            problems.add(f"{where}: {key} must be a list of URLs")
    return check


def _run_open_tabs(run: SetupRun, parameters: dict, where: str) -> None:
    from agent.envs.desktop import chrome

    chrome.open_tabs(run.desktop, parameters["urls_to_open"], where=where)


def _run_close_tabs(run: SetupRun, parameters: dict, where: str) -> None:
    from agent.envs.desktop import chrome

    chrome.close_tabs(run.desktop, parameters["urls_to_close"], where=where)


SETUP_STEPS: dict[str, StepKind] = {
    "launch": StepKind(("command",), _run_launch, _check_launch),
    "execute": StepKind(("command",), _run_command, _check_command),
    "command": StepKind(("command",), _run_command, _check_command),
    "open": StepKind(("path",), _run_open, _check_open),
    "sleep": StepKind(("seconds",), _run_sleep, _check_sleep),
    "activate_window": StepKind(("window_name",), _run_activate),
    "close_window": StepKind(("window_name",), _run_close),
    "upload_file": StepKind(("files",), _run_upload,
                            lambda p, w, pr, c: _check_files(p, w, pr, c, key="local_path")),
    "download": StepKind(("files",), _run_download, lambda p, w, pr, c: _check_files(p, w, pr, c, key="url")),
    "chrome_open_tabs": StepKind(("urls_to_open",), _run_open_tabs, _check_urls("urls_to_open")),
    "chrome_close_tabs": StepKind(("urls_to_close",), _run_close_tabs, _check_urls("urls_to_close")),
}
# steps Loupe cannot offer offline, and why
REFUSED_STEPS = {
    "googledrive": "the googledrive step puts files in a Google Drive account, which Loupe cannot reach (offline, "
                   "and no account); rewrite the task to download its files (the project's file store holds them)",
    "login": "the login step signs Chrome into a Google account, which Loupe cannot do offline",
    "update_browse_history": "the update_browse_history step writes Chrome's history database, which Loupe does not "
                             "support yet",
}


# -- evaluating ------------------------------------------------------------------------------
def evaluate_task(task: OSWorldTask, desktop: Any, *, answer: str | None, files: dict | None = None) -> float | None:
    """Score the episode (0..1): postconfig, then each metric on its getters, combined by conj. ``answer`` is the
    agent's ``finished`` answer, if it ended with one. None for a person-judged task (an empty evaluator)."""
    from agent.envs.desktop.osworld_getters import get_state

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


# the registries of getters and metrics, each in its own module
from agent.envs.desktop.osworld_getters import GETTERS, REFUSED_GETTERS  # noqa: E402
from agent.envs.desktop.osworld_metrics import METRICS, TABLE_RULES, compare_table  # noqa: E402
