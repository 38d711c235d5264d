"""OSWorld's metrics (``evaluator.func``): a score in 0..1 from what the getters read, with OSWorld's signatures
``metric(result, expected, **options)``.

One registry, ``METRICS``: each metric's function, the options it takes (None: any, as OSWorld passes them on) and
whether it needs a result and an expected getter. A file the agent left unreadable, or a value of another shape,
scores 0 (the check ran and the state is not what it wants), never an error of the episode. Written from what
OSWorld's metrics do (desktop_env/evaluators/metrics); text similarity is difflib's ratio where OSWorld uses
rapidfuzz's, and SSIM is computed here (a 7x7 window, as scikit-image's default).
"""

from __future__ import annotations

import difflib
import json
import operator
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

__all__ = ["METRICS", "TABLE_RULES", "MetricKind", "compare_table", "ssim"]


@dataclass(frozen=True)
class MetricKind:
    func: Callable[..., float]
    options: tuple[str, ...] | None = ()  # None: any option, passed on
    needs_result: bool = True
    needs_expected: bool = True
    check: Callable[[dict, Any, str, Any], None] | None = None

    def score(self, result: Any, expected: Any, options: dict) -> float:
        try:
            return float(self.func(result, expected, **options))
        except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, zipfile.BadZipFile,
                SyntaxError, re.error, shutil.ReadError):
            return 0.0  # what the agent left (or did not) is not what the check reads


def _text(path: str | None) -> str | None:
    return Path(path).read_text(errors="replace") if path else None


# -- general ---------------------------------------------------------------------------------
def exact_match(result: Any, rules: dict) -> float:
    return float(result == rules["expected"])


def check_include_exclude(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    text = result if isinstance(result, str) else json.dumps(result)
    return float(all(item in text for item in rules.get("include", []))
                 and not any(item in text for item in rules.get("exclude", [])))


def _ratio(first: str, second: str) -> float:
    return difflib.SequenceMatcher(None, first, second, autojunk=False).ratio()


def fuzzy_match(result: Any, rules: dict) -> float:
    if result is None:
        return 0.0
    return _ratio(str(result), str(rules["expected"]))


_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}


def match_rule(value: Any, rule: dict) -> bool:
    """OSWorld's value rule ``{"method": "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "re", "ref": ...}``."""
    method = rule.get("method", "eq")
    if method == "re":
        return isinstance(value, str) and re.search(rule["ref"], value) is not None
    try:
        return bool(_COMPARE[method](value, rule["ref"]))
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
            total *= max((float(text == rule["text"]) if rule.get("exact", True) else _ratio(text, rule["text"]))
                         for text in texts)
    return total


# -- the OS ------------------------------------------------------------------------------------
def check_gnome_favorite_apps(apps: str | None, rule: dict) -> float:
    import ast

    found = ast.literal_eval(apps.strip()) if apps else None
    return float(isinstance(found, list) and len(found) == len(rule["expected"]) and set(found) == set(rule["expected"]))


def is_utc_0(output: str | None, expected: Any = None) -> float:
    """``timedatectl status``'s fourth line (the time zone) ends in "+0000)"."""
    lines = (output or "").split("\n")
    return float(len(lines) > 3 and lines[3].endswith("+0000)"))


def check_text_enlarged(scaling: str | None, expected: Any = None) -> float:
    return float(float((scaling or "").strip()) > 1.0)


def check_moved_jpgs(tree: dict | None, rule: dict) -> float:
    if not tree:
        return 0.0
    names = [node["name"] for node in tree["children"]]
    return float(len(names) == len(rule["expected"]) and set(names) == set(rule["expected"]))


# -- apps' settings ----------------------------------------------------------------------------
_PREF = re.compile(r'^user_pref\("(?P<key>(?:[^"]|\\")+)", (?P<val>.+)\);$')


def check_thunderbird_prefs(result: str | None, rule: dict) -> float:
    """Thunderbird's prefs.js: each ``expect`` key is set to a value its rule matches, no ``unexpect`` one is."""
    if result is None:
        return 0.0
    expect, unexpect = rule.get("expect", {}), rule.get("unexpect", {})
    found = dict.fromkeys(expect, False)
    for line in Path(result).read_text(errors="replace").splitlines():
        match = _PREF.match(line.strip())
        if match is None:
            continue
        key, value = match.group("key"), json.loads(match.group("val"))
        if key in expect:
            found[key] = match_rule(value, expect[key])
        elif key in unexpect and match_rule(value, unexpect[key]):
            return 0.0
    return float(all(found.values()))


_CONDITION = re.compile(r'\b(?:AND|OR) \((?:[\w ]+),(?:[\w \']+),(?:"(?:(?:[^"]|\")+)"|(?:[^)]+))\)|\bALL\b')


def _filter_value(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


def check_thunderbird_filter(result: str | None, rules: dict) -> float:
    """msgFilterRules.dat: some filter matches each ``expect`` record (its keys equal), none an ``unexpect`` one."""
    if result is None:
        return 0.0
    filters: list[dict] = []
    current: dict = {}
    for line in Path(result).read_text(errors="replace").splitlines():
        key, _, raw = line.partition("=")
        value = _filter_value(raw[1:-1]) if raw.startswith('"') and raw.endswith('"') else raw
        if key == "name":
            current = {"name": value}
        elif key in ("enabled", "type", "action", "actionValue"):
            current[key] = value
        elif key == "condition":
            current["condition"] = _CONDITION.findall(value)
            filters.append(current)

    def matches(pattern: dict, item: dict) -> bool:
        return all(key in item and item[key] == value for key, value in pattern.items())

    expect, unexpect = rules.get("expect", []), rules.get("unexpect", [])
    if any(matches(pattern, item) for item in filters for pattern in unexpect):
        return 0.0
    return float(all(any(matches(pattern, item) for item in filters) for pattern in expect))


def _vlc_setting(path: str, key: str, default: str) -> str:
    """The last line of vlcrc naming ``key=`` (OSWorld reads commented defaults too), its value."""
    value = default
    for line in Path(path).read_text(errors="replace").splitlines():
        if f"{key}=" in line:
            value = line.split("=")[-1].strip()
    return value


def check_qt_bgcone(config: str | None, rule: dict) -> float:
    if config is None:
        return 0.0
    return float(_vlc_setting(config, "qt-bgcone", "1") == str(rule["expected_qt_bgcone"]))


def check_global_key_play_pause(config: str | None, rule: dict) -> float:
    if config is None:
        return 0.0
    set_ = _vlc_setting(config, "global-key-play-pause", "") != ""
    return float(("1" if set_ else "0") == str(rule["expected_global_key_play_pause"]))


def is_vlc_playing(status: str | None, rule: dict) -> float:
    """VLC's status.xml says it is playing the file (``type: file_name``) or URL (``type: url``) the rule names."""
    if status is None:
        return 0.0
    from xml.etree import ElementTree

    tree = ElementTree.fromstring(Path(status).read_text())
    if tree.findtext("state") != "playing":
        return 0.0
    info = "filename" if rule["type"] == "file_name" else "url"
    value = tree.findtext(f'information/category[@name="meta"]/info[@name="{info}"]') or ""
    return float(bool(value) and value.endswith(rule["file_name" if info == "filename" else "url"]))


def check_json_settings(actual: str | None, expected: dict, **options: Any) -> float:
    """The JSON file holds every key of ``expected["expected"]`` with its value."""
    if not actual:
        return 0.0
    data = json.loads(Path(actual).read_text())
    return float(isinstance(data, dict) and all(data.get(k, object()) == v for k, v in expected["expected"].items()))


def check_json_keybindings(actual: str | None, expected: dict, **options: Any) -> float:
    """VS Code's keybindings.json (a list, perhaps under a comment line) holds the expected binding."""
    if not actual:
        return 0.0
    text = Path(actual).read_text(errors="replace")
    for candidate in (text, text.split("\n", 1)[-1]):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, list):
            return float(expected["expected"] in data)
    return 0.0


def compare_text_file(actual: str | None, expected: str | None, **options: Any) -> float:
    if not actual or not expected:
        return 0.0
    first, second = Path(actual).read_text(errors="replace"), Path(expected).read_text(errors="replace")
    if options.get("ignore_blanks"):
        first, second = (re.sub(r"\s+", " ", text).strip() for text in (first, second))
    if options.get("ignore_case"):
        first, second = first.lower(), second.lower()
    return float(first == second)


def compare_config(actual: str | None, rules: dict, **options: Any) -> float:
    return float(bool(actual) and Path(actual).read_text(errors="replace") == rules["expected"])


def is_extension_installed(actual: str | None, rules: dict, **options: Any) -> float:
    if rules["type"] == "contain":
        return float(actual is not None and rules["expected"] in actual)
    if rules["type"] == "not_contain":
        return float(actual is None or rules["expected"] not in actual)
    raise ValueError(f"is_extension_installed: unknown type {rules['type']!r}")


# -- chrome --------------------------------------------------------------------------------------
def _normal_url(url: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(scheme=(parsed.scheme or "http").lower(),
                                      netloc=parsed.netloc.lower().replace("www.", ""),
                                      path=parsed.path if parsed.path != "/" else ""))


def same_url(first: str | None, second: str | None) -> bool:
    if first is None or second is None:
        return first == second
    return _normal_url(first) == _normal_url(second)


def is_expected_active_tab(active: Any, rule: dict) -> float:
    if not active or rule["type"] != "url":
        return 0.0
    return float(same_url(rule["url"], active.get("url") if isinstance(active, dict) else active))


def is_expected_url_pattern_match(result: Any, rules: dict) -> float:
    """Every regex of ``rules["expected"]`` is found in the URL (of the active tab)."""
    url = result.get("url") if isinstance(result, dict) else result
    return float(bool(url) and all(re.search(pattern, url) for pattern in rules["expected"]))


def is_expected_tabs(tabs: list | None, rule: dict) -> float:
    if tabs is None or rule["type"] != "url":
        return 0.0
    urls = [tab["url"] for tab in tabs]
    return float(len(urls) == len(rule["urls"]) and all(any(same_url(u, a) for a in urls) for u in rule["urls"]))


def is_added_to_steam_cart(page: dict | None, rule: dict) -> float:
    if not page:
        return 0.0
    return float(all(item in page["content"] for item in rule["items"]))


# -- documents -----------------------------------------------------------------------------------
def _docx(path: str | None) -> Any:
    from docx import Document
    from docx.opc.exceptions import PackageNotFoundError

    try:
        return Document(path) if path else None
    except PackageNotFoundError as exc:  # not there, or not a .docx: the check scores 0
        raise ValueError(str(exc)) from None


def _paragraph_texts(path: str) -> list[str]:
    if path.endswith(".odt"):
        import xml.etree.ElementTree as ElementTree

        with zipfile.ZipFile(path) as archive:
            root = ElementTree.fromstring(archive.read("content.xml"))
        tag = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}p"
        return ["".join(node.itertext()) for node in root.iter(tag)]
    return [paragraph.text for paragraph in _docx(path).paragraphs]


def compare_docx_files(first: str | None, second: str | None, **options: Any) -> float:
    """The documents' paragraph texts: equal (blanks squeezed, ``ignore_blanks`` by default; ``ignore_case``,
    ``ignore_order``), or with ``content_only`` their similarity."""
    if not first or not second or Path(first).suffix != Path(second).suffix:
        return 0.0
    texts = [_paragraph_texts(first), _paragraph_texts(second)]
    if options.get("ignore_order"):
        texts = [sorted(t) for t in texts]
    if options.get("ignore_case"):
        texts = [[p.lower() for p in t] for t in texts]
    if options.get("content_only"):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return _ratio(one, two)
    if options.get("ignore_blanks", True):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return float(one == two)
    return float(texts[0] == texts[1])


def compare_docx_files_and_ignore_new_lines(first: str | None, second: str | None, **options: Any) -> float:
    """compare_docx_files with the empty paragraphs left out (.docx only)."""
    if not first or not second or not (first.endswith(".docx") and second.endswith(".docx")):
        return 0.0
    texts = [[p for p in _paragraph_texts(path) if p != ""] for path in (first, second)]
    if options.get("ignore_blanks", True):
        one, two = (re.sub(r"\s+", " ", "\n".join(t)).strip() for t in texts)
        return float(one == two)
    return float(texts[0] == texts[1])


def compare_docx_tables(first: str | None, second: str | None) -> float:
    if not first or not second:
        return 0.0
    tables = [_docx(first).tables, _docx(second).tables]
    if len(tables[0]) != len(tables[1]):
        return 0.0
    for one, two in zip(*tables):
        if len(one.rows) != len(two.rows) or len(one.columns) != len(two.columns):
            return 0.0
        for i in range(len(one.rows)):
            for j in range(len(one.columns)):
                if one.cell(i, j).text.strip() != two.cell(i, j).text.strip():
                    return 0.0
    return 1.0


def compare_line_spacing(first: str | None, second: str | None) -> float:
    if not first or not second or not compare_docx_files(first, second):
        return 0.0
    one, two = _docx(first).paragraphs, _docx(second).paragraphs
    return float(len(one) == len(two) and all(a.paragraph_format.line_spacing == b.paragraph_format.line_spacing
                                              for a, b in zip(one, two)))


def compare_subscript_contains(first: str | None, second: str | None) -> float:
    if not first or not second:
        return 0.0
    for one, two in zip(_docx(first).paragraphs, _docx(second).paragraphs):
        for a, b in zip(one.runs, two.runs):
            if a.font.subscript and b.font.subscript:
                return 1.0
    return 0.0


def has_page_numbers_in_footers(path: str | None, expected: Any = None) -> float:
    if not path:
        return 0.0
    for section in _docx(path).sections:
        text = section.footer.paragraphs[0].text if section.footer.paragraphs else ""
        if not any(char.isdigit() for char in text):
            return 0.0
    return 1.0


def compare_font_names(path: str | None, rules: dict) -> float:
    if not path:
        return 0.0
    return float(all(run.font.name == rules["font_name"] for p in _docx(path).paragraphs for run in p.runs))


def is_first_line_centered(path: str | None, expected: Any = None) -> float:
    from docx.enum.text import WD_PARAGRAPH_ALIGNMENT

    if not path:
        return 0.0
    paragraphs = _docx(path).paragraphs
    return float(bool(paragraphs) and paragraphs[0].paragraph_format.alignment == WD_PARAGRAPH_ALIGNMENT.CENTER)


def check_tabstops(first: str | None, second: str | None, **options: Any) -> float:
    """The paragraphs' tab stops (alignment and position) against the expected document's: 1 minus their mean
    distance over the text width; ``word_number_split_by_tabstop`` / ``index``: each paragraph's part before the
    ``index``-th tab holds that many words."""
    from docx.enum.text import WD_TAB_ALIGNMENT

    if not first or not second:
        return 0.0
    one = [p for p in _docx(first).paragraphs if p.text.strip()]
    document = _docx(second)
    two = [p for p in document.paragraphs if p.text.strip()]
    if len(one) != len(two) or not one:
        return 0.0
    if options.get("word_number_split_by_tabstop") is not None:
        for paragraph in one:
            part = paragraph.text.split("\t")[options.get("index", 0)]
            if len([word for word in re.split(r"\s", part) if word.strip()]) != options["word_number_split_by_tabstop"]:
                return 0.0
    section = document.sections[0]
    width = section.page_width - section.left_margin - section.right_margin

    def stops(paragraph: Any) -> list:
        return [t for t in paragraph.paragraph_format.tab_stops
                if not (t.alignment == WD_TAB_ALIGNMENT.CLEAR or (t.alignment == WD_TAB_ALIGNMENT.LEFT and t.position == 0))]

    minus = 0.0
    for a, b in zip(one, two):
        tabs_a, tabs_b = stops(a), stops(b)
        if len(tabs_a) != len(tabs_b) or any(x.alignment != y.alignment for x, y in zip(tabs_a, tabs_b)):
            return 0.0
        minus += sum(abs(x.position - y.position) for x, y in zip(tabs_a, tabs_b)) / width
    return 1 - minus / len(one)


def _pdf_text(path: str) -> str:
    from pypdf import PdfReader

    return "".join(page.extract_text() or "" for page in PdfReader(path).pages).strip()


def compare_pdfs(first: Any, second: Any) -> float:
    """The PDFs' texts' mean similarity, pair by pair (a file that is missing or unreadable counts 0)."""
    if not isinstance(second, list):
        first, second = [first], [second]
    if not isinstance(first, list) or not second:
        return 0.0
    total = 0.0
    for one, two in zip(first, second):
        try:
            total += _ratio(_pdf_text(one), _pdf_text(two))
        except Exception:  # noqa: BLE001 - pypdf raises many kinds on a broken file; that pair counts 0
            continue
    return total / len(second)


def compare_archive(pred: str | None, gold: str | None, **options: Any) -> float:
    """Both archives hold the same file names (under ``file_path``), and their files compare (``file_type``:
    text, pdf, docx, image) on average."""
    if not pred or not gold:
        return 0.0
    compare = {"text": compare_text_file, "pdf": compare_pdfs, "docx": compare_docx_files,
               "image": compare_images}[options.get("file_type", "text")]
    inner = options.get("file_path", "")
    with tempfile.TemporaryDirectory() as scratch:
        folders = [Path(scratch) / "pred", Path(scratch) / "gold"]
        for archive, folder in zip((pred, gold), folders):
            shutil.unpack_archive(archive, folder)
        names = [sorted(p.name for p in (folder / inner).iterdir()) for folder in folders]
        if names[0] != names[1] or not names[0]:
            return 0.0
        return sum(compare(str(folders[0] / inner / n), str(folders[1] / inner / n)) for n in names[0]) / len(names[0])


# -- images --------------------------------------------------------------------------------------
def _box_mean(array: Any, size: int) -> Any:
    """Means of every ``size`` x ``size`` window (valid windows only), by summed-area tables."""
    import numpy as np

    table = np.pad(array, ((1, 0), (1, 0))).cumsum(0).cumsum(1)
    total = table[size:, size:] - table[:-size, size:] - table[size:, :-size] + table[:-size, :-size]
    return total / (size * size)


def ssim(first: Any, second: Any, *, size: int = 7, data_range: float = 255.0) -> float:
    """Mean structural similarity of two same-sized images (arrays, H x W or H x W x C; channels averaged), with a
    uniform 7x7 window and the usual constants (K1 0.01, K2 0.03), as scikit-image's default."""
    import numpy as np

    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if a.shape != b.shape:
        return 0.0
    if a.ndim == 3:
        return float(np.mean([ssim(a[..., c], b[..., c], size=size, data_range=data_range)
                              for c in range(a.shape[2])]))
    if min(a.shape) < size:
        return float(np.array_equal(a, b))
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    n = size * size
    mu_a, mu_b = _box_mean(a, size), _box_mean(b, size)
    var_a = (_box_mean(a * a, size) - mu_a ** 2) * n / (n - 1)
    var_b = (_box_mean(b * b, size) - mu_b ** 2) * n / (n - 1)
    cov = (_box_mean(a * b, size) - mu_a * mu_b) * n / (n - 1)
    value = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return float(value.mean())


def _image(path: str, mode: str | None = None) -> Any:
    from PIL import Image

    image = Image.open(path)
    image.load()
    return image.convert(mode) if mode else image


def _same_structure(first: Any, second: Any, threshold: float = 0.9) -> bool:
    import numpy as np

    return first.size == second.size and ssim(np.array(first), np.array(second)) >= threshold


def compare_images(first: str | None, second: str | None, **options: Any) -> float:
    """SSIM of the two images in grey, both resized to the smaller one's size."""
    if not first or not second:
        return 0.0
    from PIL import Image

    one, two = _image(first, "L"), _image(second, "L")
    size = min(one.size, two.size)
    return ssim(one.resize(size, Image.Resampling.LANCZOS), two.resize(size, Image.Resampling.LANCZOS))


def check_structure_sim(source: str | None, target: str | None) -> float:
    if source is None or target is None:
        return 0.0
    one, two = _image(source), _image(target)
    if one.mode != two.mode:
        two = two.convert(one.mode)
    return float(_same_structure(one, two))


def check_palette_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is a palette (indexed) image and looks like the original."""
    if source is None or target is None:
        return 0.0
    image = _image(source)
    return float(image.mode == "P" and _same_structure(image.convert("RGB"), _image(target, "RGB")))


def _saturation(hsv: Any) -> float:
    import numpy as np

    return float(np.array(hsv.split()[1]).mean())


def check_saturation_increase_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is more saturated than the original, and their hue and value channels keep its structure."""
    if source is None or target is None:
        return 0.0
    one, two = _image(source, "RGB").convert("HSV"), _image(target, "RGB").convert("HSV")
    h1, _, v1 = one.split()
    h2, _, v2 = two.split()
    return float(_saturation(one) > _saturation(two) and _same_structure(h1, h2) and _same_structure(v1, v2))


def _brightness(image: Any) -> float:
    import numpy as np

    return float(np.array(image.convert("L")).mean())


def check_brightness_decrease_and_structure_sim(source: str | None, target: str | None) -> float:
    """The result is darker than the original, and the same picture once both are brought to one brightness (their
    mean squared difference under 0.03, on 0..1 values)."""
    import numpy as np

    if source is None or target is None:
        return 0.0
    one, two = _image(source, "RGB"), _image(target, "RGB")
    if one.size != two.size or _brightness(one) >= _brightness(two):
        return 0.0

    def normal(image: Any) -> Any:
        factor = 128 / max(_brightness(image), 1e-6)
        return np.clip(np.array(image, dtype=np.float32) * factor, 0, 255).astype(np.uint8) / 255.0

    return float(np.mean((normal(one) - normal(two)) ** 2) < 0.03)


def compare_image_text(path: str | None, rule: dict) -> float:
    """The rule's text is among the words OCR reads in the image (tesseract; OSWorld uses easyocr)."""
    if not path or rule.get("type") != "text":
        return 0.0
    if shutil.which("tesseract") is None:
        raise OSError("tesseract is not installed")
    result = subprocess.run(["tesseract", path, "-", "--psm", "6"], capture_output=True, text=True, timeout=60)
    return float(rule["text"] in " ".join(result.stdout.split()))


# -- spreadsheets (openpyxl) ---------------------------------------------------------------------
# compare_table's rule types -> the keys each needs
TABLE_RULES: dict[str, tuple[str, ...]] = {
    "sheet_name": (), "sheet_data": ("sheet_idx0", "sheet_idx1"), "check_cell": ("coordinate", "props"),
    "chart": ("sheet_idx0", "sheet_idx1", "chart_props"),
    "freeze": ("sheet_idx0", "sheet_idx1"),
}
CHART_PROPS = ("title", "legend", "width", "height", "type", "direction", "xtitle", "ytitle")


def _check_table_rules(options: dict, expected: Any, where: str, problems: Any) -> None:
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
            elif props["value"].get("method", "eq") not in ("re", *_COMPARE):
                problems.add(f"{where}: check_cell method {props['value'].get('method')!r}; supported: re, "
                             f"{', '.join(_COMPARE)}")


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


def _infeasible(result: Any, expected: Any) -> float:  # scored by evaluate_task from the agent's answer
    return 0.0


METRICS: dict[str, MetricKind] = {
    "infeasible": MetricKind(_infeasible, needs_result=False, needs_expected=False),
    "exact_match": MetricKind(exact_match),
    "check_include_exclude": MetricKind(check_include_exclude),
    "fuzzy_match": MetricKind(fuzzy_match),
    "check_json": MetricKind(check_json, ("is_yaml",)),
    "check_list": MetricKind(check_list),
    "is_in_list": MetricKind(is_in_list),
    "diff_text_file": MetricKind(diff_text_file),
    "check_csv": MetricKind(check_csv),
    "compare_csv": MetricKind(compare_csv, ("strict", "ignore_case")),
    "check_json_keybindings": MetricKind(check_json_keybindings, None),
    "is_expected_url_pattern_match": MetricKind(is_expected_url_pattern_match),
    "compare_docx_files_and_ignore_new_lines": MetricKind(compare_docx_files_and_ignore_new_lines, ("ignore_blanks",)),
    "check_brightness_decrease_and_structure_sim": MetricKind(check_brightness_decrease_and_structure_sim),
    "check_direct_json_object": MetricKind(check_direct_json_object),
    "check_accessibility_tree": MetricKind(check_accessibility_tree),
    "compare_table": MetricKind(compare_table, ("rules",), needs_expected=False, check=_check_table_rules),
    "check_gnome_favorite_apps": MetricKind(check_gnome_favorite_apps),
    "is_utc_0": MetricKind(is_utc_0, needs_expected=False),
    "check_text_enlarged": MetricKind(check_text_enlarged, needs_expected=False),
    "check_moved_jpgs": MetricKind(check_moved_jpgs),
    "check_thunderbird_prefs": MetricKind(check_thunderbird_prefs),
    "check_thunderbird_filter": MetricKind(check_thunderbird_filter),
    "check_qt_bgcone": MetricKind(check_qt_bgcone),
    "check_global_key_play_pause": MetricKind(check_global_key_play_pause),
    "is_vlc_playing": MetricKind(is_vlc_playing),
    "check_json_settings": MetricKind(check_json_settings, None),
    "compare_text_file": MetricKind(compare_text_file, ("ignore_blanks", "ignore_case")),
    "compare_config": MetricKind(compare_config, None),
    "is_extension_installed": MetricKind(is_extension_installed, None),
    "is_expected_active_tab": MetricKind(is_expected_active_tab),
    "is_expected_tabs": MetricKind(is_expected_tabs),
    "is_added_to_steam_cart": MetricKind(is_added_to_steam_cart),
    "compare_docx_files": MetricKind(compare_docx_files, ("ignore_blanks", "ignore_case", "ignore_order",
                                                          "content_only")),
    "compare_docx_tables": MetricKind(compare_docx_tables),
    "compare_line_spacing": MetricKind(compare_line_spacing),
    "compare_subscript_contains": MetricKind(compare_subscript_contains),
    "has_page_numbers_in_footers": MetricKind(has_page_numbers_in_footers, needs_expected=False),
    "compare_font_names": MetricKind(compare_font_names),
    "is_first_line_centered": MetricKind(is_first_line_centered, needs_expected=False),
    "check_tabstops": MetricKind(check_tabstops, ("word_number_split_by_tabstop", "index")),
    "compare_pdfs": MetricKind(compare_pdfs),
    "compare_archive": MetricKind(compare_archive, ("file_path", "file_type")),
    "compare_images": MetricKind(compare_images),
    "check_structure_sim": MetricKind(check_structure_sim),
    "check_palette_and_structure_sim": MetricKind(check_palette_and_structure_sim),
    "check_saturation_increase_and_structure_sim": MetricKind(check_saturation_increase_and_structure_sim),
    "compare_image_text": MetricKind(compare_image_text),
}
