"""OSWorld's general metrics: text, JSON, lists, CSV files and the accessibility tree, and the rule matching
the other metric modules share. Registered in osworld_metrics.METRICS."""

from __future__ import annotations

import difflib
import json
import operator
import re
from pathlib import Path
from typing import Any


# -- general ---------------------------------------------------------------------------------
def exact_match(result: Any, rules: dict) -> float:
    return float(result == rules["expected"])


def check_include_exclude(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    text = result if isinstance(result, str) else json.dumps(result)
    return float(all(item in text for item in rules.get("include", []))
                 and not any(item in text for item in rules.get("exclude", [])))


def ratio(first: str, second: str) -> float:
    return difflib.SequenceMatcher(None, first, second, autojunk=False).ratio()


def fuzzy_match(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    return ratio(str(result), str(rules["expected"]))


COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}


def match_rule(value: Any, rule: dict) -> bool:
    """OSWorld's value rule ``{"method": "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "re", "ref": ...}``."""
    method = rule.get("method", "eq")
    if method == "re":
        return isinstance(value, str) and re.search(rule["ref"], value) is not None
    try:
        return bool(COMPARE[method](value, rule["ref"]))
    except TypeError:
        return False


def check_json(result: str | None, rules: dict, is_yaml: bool = False) -> float:
    """``rules["expect"]`` / ``["unexpect"]``: lists of ``{"key": [path...], "method", "ref"}``."""
    if result is None:
        return 0.0
    text = Path(result).read_text()
    if is_yaml:
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)

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
        if not found or not match_rule(value, rule):
            return 0.0
    for rule in rules.get("unexpect", []):
        found, value = lookup(rule["key"])
        if found and match_rule(value, rule):
            return 0.0
    return 1.0


def check_list(result: str | None, rules: dict) -> float:
    """Every ``expect`` regex matches some line of the file ``result``, and no ``unexpect`` regex matches any."""
    if result is None:
        return 0.0
    expect = [re.compile(pattern) for pattern in rules.get("expect", [])]
    unexpect = [re.compile(pattern) for pattern in rules.get("unexpect", [])]
    found = [False] * len(expect)
    for line in Path(result).read_text(errors="replace").splitlines():
        found = [seen or pattern.search(line) is not None for seen, pattern in zip(found, expect)]
        if any(pattern.search(line) for pattern in unexpect):
            return 0.0
    return float(all(found))


def is_in_list(result: Any, rules: dict) -> float:
    return float(result is not None and rules["expected"] in result)


def diff_text_file(result: str | None, expected: str | None) -> float:
    """How alike two text files are, line by line (difflib's ratio over their lines)."""
    if result is None or expected is None:
        return 0.0
    lines = [Path(path).read_text(errors="replace").splitlines() for path in (result, expected)]
    return difflib.SequenceMatcher(a=lines[0], b=lines[1], autojunk=False).ratio()


def check_csv(result: str | None, rules: dict) -> float:
    """Some row of the CSV file matches each ``expect`` record (its columns equal), none an ``unexpect`` one."""
    import csv

    if result is None:
        return 0.0
    with open(result, newline="", errors="replace") as handle:
        rows = list(csv.DictReader(handle))

    def matches(pattern: dict, row: dict) -> bool:
        return all(key in row and row[key] == value for key, value in pattern.items())

    if any(matches(pattern, row) for row in rows for pattern in rules.get("unexpect", [])):
        return 0.0
    return float(all(any(matches(pattern, row) for row in rows) for pattern in rules.get("expect", [])))


def compare_csv(result: str | None, expected: str | None, **options: Any) -> float:
    """The two files' lines are equal (``strict``: False strips each, ``ignore_case``)."""
    if result is None or expected is None:
        return 0.0
    lines = [Path(path).read_text(errors="replace").splitlines() for path in (result, expected)]
    if not options.get("strict", True):
        lines = [[line.strip() for line in part] for part in lines]
    if options.get("ignore_case", False):
        lines = [[line.lower() for line in part] for part in lines]
    return float(lines[0] == lines[1])


def check_direct_json_object(result: Any, rules: dict) -> float:
    """The keys of ``rules["expected"]`` hold those values in ``result`` (a dict, or its JSON with single quotes);
    ``expect_in_result``: each expected text is inside the result's, an expected list shares an item with it."""
    if isinstance(result, str):
        result = json.loads(result.strip().replace("'", '"'))
    if not isinstance(result, dict):
        return 0.0
    expected = rules["expected"]
    if not rules.get("expect_in_result", False):
        return float(all(result.get(key) == value for key, value in expected.items()))
    for key, value in expected.items():
        actual = result.get(key)
        if isinstance(value, list):
            if not (isinstance(actual, list) and any(item in actual for item in value)):
                return 0.0
        elif not (isinstance(value, str) and isinstance(actual, str) and value in actual):
            return 0.0
    return 1.0


def check_accessibility_tree(result: str | None, rules: list) -> float:
    """Each rule's ``selectors`` (CSS, joined) or ``xpath`` finds an element of the accessibility tree; with
    ``text``, its text equals it (``exact``, the default) or the best fuzzy ratio counts. Scores multiply."""
    if not result:
        return 0.0
    import lxml.etree
    from lxml.cssselect import CSSSelector

    tree = lxml.etree.fromstring(f"<desktop-frame>{result}</desktop-frame>")
    total = 1.0
    for rule in rules:
        if "xpath" in rule:
            elements = tree.xpath(rule["xpath"])
        else:
            elements = CSSSelector(", ".join(rule["selectors"]))(tree)
        if not elements:
            return 0.0
        if "text" in rule:
            texts = [element.text or "" for element in elements]
            total *= max((float(text == rule["text"]) if rule.get("exact", True) else ratio(text, rule["text"]))
                         for text in texts)
    return total
