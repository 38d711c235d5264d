"""OSWorld's metrics of the OS and its apps' settings (GNOME, Thunderbird, VLC, VS Code) and of Chrome's state.
Registered in osworld_metrics.METRICS."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

from agent.envs.desktop.osworld_metrics_general import match_rule


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
