"""OSWorld-format tasks: read from their JSON, set up on a desktop, evaluated by getters and metrics.

The offline subset of OSWorld's task format (https://github.com/xlang-ai/OSWorld, ``evaluation_examples``),
written here rather than taken from the ``desktop-env`` package (68 requirements, torch among them):

- setup steps (``config`` and ``evaluator.postconfig``): ``launch``, ``execute`` / ``command``,
  ``open``, ``sleep``, ``activate_window``, ``upload_file`` (``files: [{"local_path", "path"}]``, the
  local path a file of the local cache, ``cache/`` beside the tasks: OSWorld downloads them instead);
- getters (``evaluator.result`` / ``expected``): ``vm_file``, ``vm_command_line``, ``rule``,
  ``list_directory``, ``accessibility_tree``, and ``cache_file`` (a file of the local cache: the offline
  stand-in for OSWorld's ``cloud_file``, for a golden spreadsheet);
- metrics (``evaluator.func``): ``exact_match``, ``check_include_exclude``, ``fuzzy_match``,
  ``check_json``, ``compare_table`` (openpyxl; rules ``sheet_name``, ``sheet_data``, ``check_cell``),
  ``infeasible``; a list of funcs is combined by ``conj`` (``and`` / ``or``).

``open`` opens a folder in pcmanfm and any file in mousepad (the apps this desktop ships).
Anything else is refused when the task is loaded, with an error naming it, so a task never fails
half-way through an episode for want of a feature. The VM's home (``/home/user``) and ``~`` map
onto the episode's HOME; files a getter reads must lie inside it. An infeasible task is solved by
ending with ``finished(answer="FAIL")`` (OSWorld's FAIL action); that answer scores 0 on any other task.
"""

from __future__ import annotations

import difflib
import json
import operator
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.envs.base import EnvError

__all__ = [
    "GETTERS", "METRICS", "SETUP_STEPS", "OSWorldTask", "TaskFormatError", "evaluate_task", "load_task",
    "load_task_file", "load_tasks_dir", "run_setup", "FAIL_ANSWERS", "CACHE_DIR", "TABLE_RULES",
]

VM_HOME = "/home/user"
FAIL_ANSWERS = ("fail", "infeasible")
# Required parameters of each supported setup step.
SETUP_STEPS: dict[str, tuple[str, ...]] = {
    "launch": ("command",), "execute": ("command",), "command": ("command",), "open": ("path",),
    "sleep": ("seconds",), "activate_window": ("window_name",), "upload_file": ("files",),
}
GETTERS: dict[str, tuple[str, ...]] = {
    "vm_file": ("path",), "vm_command_line": ("command",), "rule": ("rules",), "list_directory": ("path",),
    "accessibility_tree": (), "cache_file": ("path",),
}
# metric -> the options it takes
METRICS: dict[str, tuple[str, ...]] = {
    "exact_match": (), "check_include_exclude": (), "fuzzy_match": (), "check_json": ("is_yaml",),
    "compare_table": ("rules",), "infeasible": (),
}
# compare_table's rule types -> the keys each needs; and the ones that compare with the expected workbook
TABLE_RULES: dict[str, tuple[str, ...]] = {
    "sheet_name": (), "sheet_data": ("sheet_idx0", "sheet_idx1"), "check_cell": ("coordinate", "props"),
}
CACHE_DIR = Path(__file__).with_name("cache")


class TaskFormatError(ValueError):
    """A task file that is not valid OSWorld JSON or uses what Loupe does not support; says which."""


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

    @property
    def funcs(self) -> list[str]:
        func = self.evaluator["func"]
        return func if isinstance(func, list) else [func]


# -- loading ---------------------------------------------------------------------------------
def _as_list(value: Any, n: int) -> list:
    if isinstance(value, list):
        return value
    return [value] * n if value is not None else [None] * n


def _check_steps(steps: Any, where: str, fail: Callable[[str], TaskFormatError]) -> list[dict]:
    if steps is None:
        return []
    if not isinstance(steps, list):
        raise fail(f"{where} must be a list of steps")
    for step in steps:
        if not isinstance(step, dict) or "type" not in step:
            raise fail(f"{where}: every step needs a type, got {step!r}")
        kind = step["type"]
        if kind not in SETUP_STEPS:
            raise fail(f"unsupported setup step {kind!r} in {where}; supported: {', '.join(SETUP_STEPS)}")
        parameters = step.get("parameters", {})
        if not isinstance(parameters, dict):
            raise fail(f"{where}: {kind} parameters must be an object")
        missing = [name for name in SETUP_STEPS[kind] if name not in parameters]
        if missing:
            raise fail(f"{where}: {kind} needs {', '.join(missing)}")
        if kind == "open":
            _check_home_path(parameters["path"], f"{where}: open", fail)
        if kind == "upload_file":
            files = parameters["files"]
            if not isinstance(files, list) or not files or not all(
                    isinstance(item, dict) and {"local_path", "path"} <= set(item) for item in files):
                raise fail(f"{where}: upload_file files must be a list of {{\"local_path\", \"path\"}} objects")
            for item in files:
                _check_home_path(item["path"], f"{where}: upload_file", fail)
    return steps


def _cached(name: Any, cache_dir: Path, where: str, fail: Callable[[str], TaskFormatError]) -> str:
    """The absolute path of a file of the local cache; refused when it is not there or lies outside it."""
    if not isinstance(name, str) or not name:
        raise fail(f"{where}: a cache file's path must be a file name, got {name!r}")
    path = (cache_dir / name).resolve()
    if cache_dir.resolve() not in path.parents or not path.is_file():
        raise fail(f"{where}: no file {name!r} in the local cache ({cache_dir})")
    return str(path)


def _resolve_cache(value: Any, cache_dir: Path, where: str, fail: Callable[[str], TaskFormatError]) -> Any:
    """A copy of ``value`` with every upload_file local_path and cache_file path made absolute in the cache."""
    if isinstance(value, list):
        return [_resolve_cache(item, cache_dir, where, fail) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _resolve_cache(item, cache_dir, where, fail) for key, item in value.items()}
    if "local_path" in out and "path" in out:
        out["local_path"] = _cached(value["local_path"], cache_dir, f"{where}: upload_file", fail)
    if out.get("type") == "cache_file":
        out["path"] = _cached(value.get("path"), cache_dir, f"{where}: cache_file", fail)
    return out


def _check_table_rules(rules: Any, has_expected: bool, where: str, fail: Callable[[str], TaskFormatError]) -> None:
    if not isinstance(rules, list) or not rules:
        raise fail(f"{where}: compare_table needs options.rules, a non-empty list")
    for rule in rules:
        kind = rule.get("type") if isinstance(rule, dict) else None
        if kind not in TABLE_RULES:
            raise fail(f"unsupported compare_table rule {kind!r} in {where}; supported: {', '.join(TABLE_RULES)}")
        missing = [key for key in TABLE_RULES[kind] if key not in rule]
        if missing:
            raise fail(f"{where}: compare_table rule {kind} needs {', '.join(missing)}")
        if kind in ("sheet_name", "sheet_data") and not has_expected:
            raise fail(f"{where}: compare_table rule {kind} compares with evaluator.expected, which is missing")
        if kind == "check_cell":
            props = rule["props"]
            if not isinstance(props, dict) or set(props) != {"value"} or not isinstance(props["value"], dict):
                raise fail(f"{where}: check_cell props must be {{\"value\": {{\"method\", \"ref\"}}}} (only a "
                           f"cell's value is checked), got {props!r}")
            method = props["value"].get("method", "eq")
            if method not in ("re", *_COMPARE):
                raise fail(f"{where}: check_cell method {method!r}; supported: re, {', '.join(_COMPARE)}")


def _check_home_path(path: Any, where: str, fail: Callable[[str], TaskFormatError]) -> None:
    if not isinstance(path, str) or not (path == VM_HOME or path.startswith((VM_HOME + "/", "~/"))):
        raise fail(f"{where}: path {path!r} must lie in the VM's home ({VM_HOME}/... or ~/...)")


def _check_getter(spec: Any, where: str, fail: Callable[[str], TaskFormatError]) -> None:
    if spec is None:
        return
    if not isinstance(spec, dict) or "type" not in spec:
        raise fail(f"{where} must be a getter object with a type, got {spec!r}")
    kind = spec["type"]
    if kind not in GETTERS:
        raise fail(f"unsupported getter {kind!r} in {where}; supported: {', '.join(GETTERS)}")
    missing = [name for name in GETTERS[kind] if name not in spec]
    if missing:
        raise fail(f"{where}: getter {kind} needs {', '.join(missing)}")
    if kind == "vm_file" and (spec.get("multi") or isinstance(spec["path"], list)):
        raise fail(f"{where}: vm_file with several paths (multi) is not supported; use one getter a file")
    if kind in ("vm_file", "list_directory"):
        _check_home_path(spec["path"], f"{where}: {kind}", fail)


def load_task(data: Any, *, origin: str = "", cache_dir: Path = CACHE_DIR) -> OSWorldTask:
    """Validate one OSWorld task object; TaskFormatError names what is wrong or unsupported."""
    label = f"{data.get('id', '?')}" if isinstance(data, dict) else "?"

    def fail(message: str) -> TaskFormatError:
        return TaskFormatError(f"OSWorld task {label}{f' ({origin})' if origin else ''}: {message}")

    if not isinstance(data, dict):
        raise fail("a task must be a JSON object")
    for key in ("id", "instruction", "evaluator"):
        if key not in data:
            raise fail(f"missing {key!r}")
    if not isinstance(data["id"], str) or not data["id"].strip():
        raise fail("id must be a non-empty string")
    if not isinstance(data["instruction"], str) or not data["instruction"].strip():
        raise fail("instruction must be a non-empty string")
    config = _check_steps(data.get("config", []), "config", fail)
    evaluator = data["evaluator"]
    if not isinstance(evaluator, dict) or "func" not in evaluator:
        raise fail("evaluator must be an object with a func")
    funcs = evaluator["func"] if isinstance(evaluator["func"], list) else [evaluator["func"]]
    if not funcs or not all(isinstance(func, str) for func in funcs):
        raise fail("evaluator.func must be a metric name or a list of them")
    for func in funcs:
        if func not in METRICS:
            raise fail(f"unsupported metric {func!r}; supported: {', '.join(METRICS)}")
    conj = evaluator.get("conj", "and")
    if conj not in ("and", "or"):
        raise fail(f"evaluator.conj must be 'and' or 'or', got {conj!r}")
    n = len(funcs)
    for key in ("result", "expected", "options"):
        value = evaluator.get(key)
        if isinstance(value, list) and len(value) != n:
            raise fail(f"evaluator.{key} has {len(value)} entries for {n} funcs")
    results = _as_list(evaluator.get("result"), n)
    expecteds = _as_list(evaluator.get("expected"), n)
    options = _as_list(evaluator.get("options"), n)
    for index, func in enumerate(funcs):
        if func != "infeasible" and results[index] is None:
            raise fail(f"metric {func} needs an evaluator.result getter")
        if func not in ("infeasible", "compare_table") and expecteds[index] is None:
            raise fail(f"metric {func} needs evaluator.expected (a rule getter: {{\"type\": \"rule\", ...}})")
        _check_getter(results[index], "evaluator.result", fail)
        _check_getter(expecteds[index], "evaluator.expected", fail)
        extra = [key for key in (options[index] or {}) if key not in METRICS[func]]
        if extra:
            raise fail(f"metric {func} takes no option {', '.join(map(repr, extra))}")
        if func == "compare_table":
            _check_table_rules((options[index] or {}).get("rules"), expecteds[index] is not None,
                               "evaluator.options", fail)
    _check_steps(evaluator.get("postconfig", []), "evaluator.postconfig", fail)
    infeasible = bool(data.get("infeasible", False)) or "infeasible" in funcs
    hybrid = data.get("hybrid", False)
    if not isinstance(hybrid, bool):
        raise fail(f"hybrid must be true or false, got {hybrid!r}")
    config = _resolve_cache(config, Path(cache_dir), "config", fail)
    evaluator = _resolve_cache(evaluator, Path(cache_dir), "evaluator", fail)
    return OSWorldTask(id=data["id"], instruction=data["instruction"], config=config, evaluator=evaluator,
                       infeasible=infeasible, origin=origin, raw=data, hybrid=hybrid)


def load_task_file(path: str | Path, *, cache_dir: Path = CACHE_DIR) -> OSWorldTask:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
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


def _inside_home(path: str, home: Path) -> Path:
    resolved = Path(path).resolve()
    if resolved != home.resolve() and home.resolve() not in resolved.parents:
        raise EnvError(f"{path} resolves outside the episode's home ({resolved}); the getter will not read it")
    return resolved


def run_setup(steps: list[dict], desktop: Any, *, window_timeout_s: float = 10.0) -> None:
    """Run setup steps in order; EnvError names the step that failed and why."""
    assert desktop.home is not None
    for index, step in enumerate(map_home(steps, desktop.home)):
        kind, parameters = step["type"], step.get("parameters", {})
        where = f"setup step {index + 1} ({kind})"
        if kind == "sleep":
            time.sleep(float(parameters["seconds"]))
        elif kind in ("execute", "command"):
            try:
                result = desktop.run(parameters["command"], shell=bool(parameters.get("shell", False)),
                                     timeout_s=float(parameters.get("timeout", 30)))
            except EnvError as exc:  # it ran over its time (and maybe hit a limit: the message says)
                raise EnvError(f"{where}: {exc}") from None
            if result.returncode != 0:
                breach = desktop.breach()  # a limit of the sandbox it hit: the reason the episode failed
                raise EnvError(f"{where}: {parameters['command']!r} exited with code {result.returncode}"
                               f"{f' ({breach})' if breach else ''}: {(result.stderr or result.stdout).strip()[-300:]}")
        elif kind in ("launch", "open"):
            if kind == "open":
                path = Path(parameters["path"])
                argv: list[str] | str = ["pcmanfm", str(path)] if path.is_dir() else ["mousepad", str(path)]
            else:
                argv = parameters["command"]
            _launch(desktop, argv, shell=bool(parameters.get("shell", False)), where=where,
                    timeout_s=window_timeout_s)
        elif kind == "activate_window":
            _activate(desktop, parameters, where, window_timeout_s)
        elif kind == "upload_file":
            for item in parameters["files"]:
                _upload(desktop, Path(item["local_path"]), Path(item["path"]), where)


def _upload(desktop: Any, source: Path, target: Path, where: str) -> None:
    """Copy a cached file into the episode's HOME, owned by the session's uid (folders made as needed)."""
    home = Path(desktop.home).resolve()
    target = target.resolve()
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


def _launch(desktop: Any, argv: list[str] | str, *, shell: bool, where: str, timeout_s: float) -> None:
    """Start an app and wait for its window: a new top-level window, or the process handing its
    request to a running instance and leaving with code 0."""
    before = {window.id for window in desktop.windows()}
    log = f"launch-{int(time.monotonic() * 1000)}.log"
    process = desktop.popen(argv, shell=shell, log=log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        desktop.check_alive()
        new = [window for window in desktop.windows() if window.id not in before]
        if new:
            _wait_focus(desktop, new[-1], deadline)
            return
        code = process.poll()
        if code is not None:
            if code == 0:
                return
            raise EnvError(f"{where}: {argv!r} exited with code {code} before opening a window: "
                           f"{desktop.log_tail(log) or 'no output'}")
        time.sleep(0.03)
    raise EnvError(f"{where}: {argv!r} opened no window in {timeout_s} s")


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


def _activate(desktop: Any, parameters: dict, where: str, timeout_s: float) -> None:
    wanted, strict = parameters["window_name"], bool(parameters.get("strict", False))
    by_class = bool(parameters.get("by_class", False))
    deadline = time.monotonic() + timeout_s
    while True:
        for window in desktop.windows():
            name = window.wm_class if by_class else window.title
            if (name == wanted) if strict else (wanted.lower() in name.lower()):
                desktop.activate(window)
                time.sleep(0.1)
                return
        if time.monotonic() > deadline:
            titles = ", ".join(repr(w.title) for w in desktop.windows()) or "none"
            raise EnvError(f"{where}: no window named {wanted!r} in {timeout_s} s (windows: {titles})")
        time.sleep(0.05)


# -- getters ---------------------------------------------------------------------------------
def get_state(spec: dict | None, desktop: Any) -> Any:
    if spec is None:
        return None
    spec = map_home(spec, desktop.home)
    kind = spec["type"]
    if kind == "rule":
        return spec["rules"]
    if kind == "vm_file":
        path = _inside_home(spec["path"], desktop.home)
        return str(path) if path.is_file() else None
    if kind == "vm_command_line":
        return desktop.run(spec["command"], shell=bool(spec.get("shell", False)), timeout_s=30).stdout
    if kind == "list_directory":
        path = _inside_home(spec["path"], desktop.home)
        return _tree(path) if path.is_dir() else None
    if kind == "accessibility_tree":
        return accessibility_xml(desktop.accessibility_nodes())
    if kind == "cache_file":
        return spec["path"]  # made absolute, and checked to exist, when the task was loaded
    raise EnvError(f"unsupported getter {kind!r}")  # load_task refuses it first


def _tree(path: Path) -> dict:
    """OSWorld's list_directory shape: ``{"type": "directory", "name", "children": [...]}``."""
    children = []
    for child in sorted(path.iterdir(), key=lambda p: p.name):
        if child.is_dir() and not child.is_symlink():
            children.append(_tree(child))
        else:
            children.append({"type": "file", "name": child.name})
    return {"type": "directory", "name": path.name, "children": children}


def accessibility_xml(walk: dict) -> str:
    """The walked nodes as nested XML, one tag a role (``<push-button name="OK">text</push-button>``),
    close to OSWorld's linearised tree, so include / exclude checks can name a role and its text."""
    from xml.sax.saxutils import escape, quoteattr

    nodes = walk["nodes"]
    children: dict[int, list[dict]] = {}
    for node in nodes:
        children.setdefault(node["parent"], []).append(node)

    def render(node: dict) -> str:
        tag = re.sub(r"[^a-z0-9-]", "-", node.get("role", "unknown").lower()) or "unknown"
        inner = escape(node.get("text", "")) + "".join(render(child) for child in children.get(node["id"], []))
        return f"<{tag} name={quoteattr(node.get('name', ''))}>{inner}</{tag}>"

    return "".join(render(node) for node in children.get(-1, []))


# -- metrics (OSWorld's signatures: metric(result, expected, **options)) --------------------
def exact_match(result: Any, rules: dict) -> float:
    return float(result == rules["expected"])


def check_include_exclude(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    text = result if isinstance(result, str) else json.dumps(result)
    return float(all(item in text for item in rules.get("include", []))
                 and not any(item in text for item in rules.get("exclude", [])))


def fuzzy_match(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(None, str(result), str(rules["expected"])).ratio()


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}


def _match_rule(value: Any, rule: dict) -> bool:
    method = rule.get("method", "eq")
    if method == "re":
        return isinstance(value, str) and re.search(rule["ref"], value) is not None
    if method not in _COMPARE:
        raise EnvError(f"check_json: unknown method {method!r}; supported: re, {', '.join(_COMPARE)}")
    try:
        return bool(_COMPARE[method](value, rule["ref"]))
    except TypeError:
        return False


def check_json(result: str | None, rules: dict, is_yaml: bool = False) -> float:
    """``rules["expect"]`` / ``["unexpect"]``: lists of ``{"key": [path...], "method", "ref"}``."""
    if result is None:
        return 0.0
    try:
        text = Path(result).read_text()
        if is_yaml:
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except (OSError, ValueError):  # a file the agent left unparseable fails the check
        return 0.0

    def lookup(keys: list) -> tuple[bool, Any]:
        value = data
        for key in keys:
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                return False, None
        return True, value

    for rule in rules.get("expect", []):
        found, value = lookup(rule["key"])
        if not found or not _match_rule(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []):
        found, value = lookup(rule["key"])
        if found and _match_rule(value, rule):
            return 0.0
    return 1.0


def _workbook(path: str | None) -> Any:
    """The workbook at ``path`` with the values the app computed (not formulas); None if it is not one."""
    import zipfile

    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    if path is None:
        return None
    try:
        return openpyxl.load_workbook(path, data_only=True)
    except (OSError, InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError):
        return None  # a file the agent left unreadable fails the check


def _sheet(index: Any, result: Any, expected: Any) -> Any:
    """OSWorld's sheet index: an int (the result's n-th sheet), or "RI0" / "EI0" (result / expected by
    position), "RNSales" / "ENSales" (by name). None when there is no such sheet."""
    book, key = result, index
    if isinstance(index, str) and index[:2] in ("RI", "RN", "EI", "EN"):
        book, key = (result if index[0] == "R" else expected), index[2:]
        key = int(key) if index[1] == "I" and key.isdigit() else key
    if book is None:
        return None
    if isinstance(key, int):
        return book.worksheets[key] if 0 <= key < len(book.worksheets) else None
    return book[key] if key in book.sheetnames else None


def _sheet_values(sheet: Any, precision: int) -> list[list[Any]]:
    rows = [[round(v, precision) if isinstance(v, float) else v for v in row]
            for row in sheet.iter_rows(values_only=True)]
    rows = [row[:max((i + 1 for i, v in enumerate(row) if v not in (None, "")), default=0)] for row in rows]
    while rows and not rows[-1]:
        rows.pop()
    return rows


def compare_table(result: str | None, expected: str | None = None, rules: list | None = None) -> float:
    """OSWorld's compare_table on .xlsx files through openpyxl: 1.0 when every rule holds.
    ``sheet_name``: the same sheet names; ``sheet_data``: the same cell values in two sheets (floats rounded
    to ``precision`` places, 4 unless given); ``check_cell``: a cell's value matches ``props.value``
    (``{"method": "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "re", "ref": ...}``)."""
    book = _workbook(result)
    if book is None:
        return 0.0
    golden = _workbook(expected)
    for rule in rules or []:
        kind = rule["type"]
        if kind == "sheet_name":
            if golden is None or book.sheetnames != golden.sheetnames:
                return 0.0
        elif kind == "sheet_data":
            first, second = _sheet(rule["sheet_idx0"], book, golden), _sheet(rule["sheet_idx1"], book, golden)
            precision = int(rule.get("precision", 4))
            if first is None or second is None or _sheet_values(first, precision) != _sheet_values(second, precision):
                return 0.0
        elif kind == "check_cell":
            sheet = _sheet(rule.get("sheet_idx", 0), book, golden)
            if sheet is None or not _match_rule(sheet[rule["coordinate"]].value, rule["props"]["value"]):
                return 0.0
    return 1.0


_METRIC_FUNCS: dict[str, Callable[..., float]] = {
    "exact_match": exact_match, "check_include_exclude": check_include_exclude, "fuzzy_match": fuzzy_match,
    "check_json": check_json, "compare_table": compare_table,
}


def evaluate_task(task: OSWorldTask, desktop: Any, *, answer: str | None) -> float:
    """Score the episode (0..1): postconfig, then each metric on its getters, combined by conj.
    ``answer`` is the agent's ``finished`` answer, if it ended with one."""
    said_fail = answer is not None and answer.strip().lower() in FAIL_ANSWERS
    if task.infeasible:
        return 1.0 if said_fail else 0.0
    if said_fail:
        return 0.0
    evaluator = task.evaluator
    run_setup(evaluator.get("postconfig", []) or [], desktop)
    funcs = task.funcs
    n = len(funcs)
    results, expecteds = _as_list(evaluator.get("result"), n), _as_list(evaluator.get("expected"), n)
    options = _as_list(evaluator.get("options"), n)
    scores = []
    for func, result_spec, expected_spec, opts in zip(funcs, results, expecteds, options):
        score = _METRIC_FUNCS[func](get_state(result_spec, desktop), get_state(expected_spec, desktop),
                                    **(opts or {}))
        if evaluator.get("conj", "and") == "and" and score == 0:
            return 0.0
        scores.append(float(score))
    return max(scores) if evaluator.get("conj", "and") == "or" else sum(scores) / len(scores)
