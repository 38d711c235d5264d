"""OSWorld's metrics of spreadsheets (openpyxl): ``compare_table`` and its rules, charts included. Registered in
osworld_metrics.METRICS."""

from __future__ import annotations

import zipfile
from typing import Any

from agent.envs.desktop.osworld_metrics_general import COMPARE, match_rule

# -- spreadsheets (openpyxl) ---------------------------------------------------------------------
# compare_table's rule types -> the keys each needs
TABLE_RULES: dict[str, tuple[str, ...]] = {
    "sheet_name": (), "sheet_data": ("sheet_idx0", "sheet_idx1"), "check_cell": ("coordinate", "props"),
    "chart": ("sheet_idx0", "sheet_idx1", "chart_props"),
    "freeze": ("sheet_idx0", "sheet_idx1"),
}
CHART_PROPS = ("title", "legend", "width", "height", "type", "direction", "xtitle", "ytitle")


def check_table_rules(options: dict, expected: Any, where: str, problems: Any) -> None:
    rules = options.get("rules")
    if not isinstance(rules, list) or not rules:
        problems.add(f"{where}: compare_table needs options.rules, a non-empty list")
        return
    for rule in rules:
        kind = rule.get("type") if isinstance(rule, dict) else None
        if kind not in TABLE_RULES:
            problems.add(f"unsupported compare_table rule {kind!r} in {where}; supported: {', '.join(TABLE_RULES)}")
            continue
        missing = [key for key in TABLE_RULES[kind] if key not in rule]
        if missing:
            problems.add(f"{where}: compare_table rule {kind} needs {', '.join(missing)}")
        if kind in ("sheet_name", "sheet_data", "freeze") and not expected:
            problems.add(f"{where}: compare_table rule {kind} compares with evaluator.expected, which is missing")
        if kind == "chart" and "chart_props" in rule:
            unknown = [p for p in rule["chart_props"] if p not in CHART_PROPS] \
                if isinstance(rule["chart_props"], list) else [rule["chart_props"]]
            if unknown:
                problems.add(f"{where}: chart props {unknown!r} are not supported; supported: {', '.join(CHART_PROPS)}")
        if kind == "chart" and not expected:
            problems.add(f"{where}: compare_table rule chart compares with evaluator.expected, which is missing")
        if kind == "check_cell" and "props" in rule:
            props = rule["props"]
            if not isinstance(props, dict) or set(props) != {"value"} or not isinstance(props["value"], dict):
                problems.add(f"{where}: check_cell props must be {{\"value\": {{\"method\", \"ref\"}}}} (only a "
                             f"cell's value is checked), got {props!r}")
            elif props["value"].get("method", "eq") not in ("re", *COMPARE):
                problems.add(f"{where}: check_cell method {props['value'].get('method')!r}; supported: re, "
                             f"{', '.join(COMPARE)}")


def _workbook(path: str | None) -> Any:
    """The workbook at ``path`` with the values the app computed (not formulas); None if it is not one."""
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


def _title(title: Any) -> Any:
    try:
        return title.tx.rich.p[0].r[0].t
    except (AttributeError, IndexError, TypeError):
        return None


def _ref(data: Any) -> str:
    for kind in ("numRef", "strRef"):
        formula = getattr(getattr(data, kind, None), "f", None)
        if formula:
            return formula
    return ""


def charts(sheet: Any, props: list[str]) -> dict:
    """A sheet's charts (openpyxl reads them from the file), keyed by their series' data and category ranges, with
    the properties asked for (CHART_PROPS)."""
    found = {}
    for chart in getattr(sheet, "_charts", []) if sheet is not None else []:
        key = ";".join(f"{_ref(s.val)},{_ref(s.cat)}" for s in chart.series)
        values = {"title": lambda: _title(chart.title), "legend": lambda: chart.legend.position if chart.legend else None,
                  "width": lambda: chart.width, "height": lambda: chart.height, "type": lambda: chart.tagname,
                  "direction": lambda: getattr(chart, "barDir", None),
                  "xtitle": lambda: _title(getattr(chart.x_axis, "title", None)),
                  "ytitle": lambda: _title(getattr(chart.y_axis, "title", None))}
        found[key] = {prop: values[prop]() for prop in props}
    return found


def compare_table(result: str | None, expected: str | None = None, rules: list | None = None) -> float:
    """OSWorld's compare_table on .xlsx files through openpyxl: 1.0 when every rule holds.
    ``sheet_name``: the same sheet names; ``sheet_data``: the same cell values in two sheets (floats rounded
    to ``precision`` places, 4 unless given); ``chart``: the same charts (``chart_props`` of each); ``freeze``: the
    same frozen panes; ``check_cell``: a cell's value matches ``props.value``
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
        elif kind == "freeze":  # the same frozen panes (their top-left cell; None: none frozen)
            first, second = _sheet(rule["sheet_idx0"], book, golden), _sheet(rule["sheet_idx1"], book, golden)
            if first is None or second is None or first.freeze_panes != second.freeze_panes:
                return 0.0
        elif kind == "chart":
            first, second = _sheet(rule["sheet_idx0"], book, golden), _sheet(rule["sheet_idx1"], book, golden)
            if first is None or second is None or charts(first, rule["chart_props"]) != charts(second, rule["chart_props"]):
                return 0.0
        elif kind == "check_cell":
            sheet = _sheet(rule.get("sheet_idx", 0), book, golden)
            if sheet is None or not match_rule(sheet[rule["coordinate"]].value, rule["props"]["value"]):
                return 0.0
    return 1.0
