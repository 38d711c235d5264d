"""Chrome (Chromium here) for OSWorld's chrome steps and getters, over the DevTools protocol.

The browser runs in the session's sandbox, whose network namespace the worker is not in: each call runs
chrome_helper.py there (session.py copies it into the session's runtime folder) and reads its JSON answer. Offline,
the pages a task opens do not load; their tabs exist with their URLs, and a check of their content scores 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from agent.envs.base import EnvError

__all__ = ["active_tab_html_parse", "active_tab_info", "active_tab_url_parse", "active_url", "close_tabs",
           "enable_do_not_track", "open_tabs", "open_tabs_info", "page_info", "url_dash_part"]


def _ask(desktop: Any, command: str, args: dict, *, timeout_s: float = 30.0, where: str = "") -> Any:
    helper = Path(desktop.runtime) / "chrome_helper.py"
    result = desktop.run(["python3", str(helper), command, json.dumps(args)], timeout_s=timeout_s)
    if result.returncode != 0:
        raise EnvError(f"{where + ': ' if where else ''}the browser's DevTools: "
                       f"{(result.stderr or result.stdout).strip()[-300:]}")
    return json.loads(result.stdout)


def open_tabs(desktop: Any, urls: list[str], *, where: str) -> None:
    _ask(desktop, "open", {"urls": urls, "wait": 20}, where=where, timeout_s=40)


def close_tabs(desktop: Any, urls: list[str], *, where: str) -> None:
    _ask(desktop, "close", {"urls": urls}, where=where)


def _tabs(desktop: Any) -> list[dict] | None:
    try:
        return _ask(desktop, "tabs", {})
    except EnvError:  # no browser: a getter's answer is None, and the metric scores 0
        return None


def open_tabs_info(desktop: Any, spec: dict) -> list[dict]:
    tabs = _tabs(desktop)
    return [{"title": tab.get("title", ""), "url": tab.get("url", "")} for tab in reversed(tabs or [])]


def active_url(desktop: Any, spec: dict) -> str | None:
    """The active tab's address (OSWorld reads the address bar through AT-SPI; DevTools lists the most recently
    used page first)."""
    tabs = _tabs(desktop)
    return tabs[0]["url"] if tabs else None


def active_tab_info(desktop: Any, spec: dict) -> dict | None:
    tabs = _tabs(desktop)
    if not tabs:
        return None
    return {"title": tabs[0].get("title", ""), "url": tabs[0].get("url", ""), "content": _content(desktop)}


def _content(desktop: Any, url: str | None = None) -> str:
    try:
        answer = _ask(desktop, "evaluate", {"expression": "document.documentElement.outerHTML",
                                            **({"url": url} if url else {})})
    except EnvError:
        return ""
    return answer.get("value") or ""


def page_info(desktop: Any, spec: dict) -> dict | None:
    try:
        answer = _ask(desktop, "evaluate", {"url": spec["url"], "expression":
                                            "[document.title, document.documentElement.outerHTML]"})
    except EnvError:
        return None
    title, content = answer.get("value") or ["", ""]
    return {"title": title, "url": answer.get("url"), "content": content}


def active_tab_url_parse(desktop: Any, spec: dict) -> dict | None:
    url = active_url(desktop, spec)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    found = {key: query.get(key, [""])[0] for key in spec["parse_keys"]}
    for old, new in (spec.get("replace") or {}).items():
        found[new] = found.pop(old, "")
    return found


def url_dash_part(desktop: Any, spec: dict) -> Any:
    """A "/"-separated part of the active tab's address (``partIndex``; ``needDeleteId``: its query dropped), as a
    string or ``{key: part}`` (``returnType`` json)."""
    url = active_url(desktop, spec)
    if url is None:
        return None
    parts = url.split("/")
    index = int(spec["partIndex"])
    part = parts[index] if -len(parts) <= index < len(parts) else ""
    if spec.get("needDeleteId"):
        part = part.split("?")[0]
    return {spec["key"]: part} if spec.get("returnType") == "json" else part


def active_tab_html_parse(desktop: Any, spec: dict) -> dict | None:
    """Texts of the active tab's elements, by OSWorld's categories: ``xpath`` / ``input`` (full XPaths), ``class``
    (``class_singleObject``, ``class_multiObject``), ``label`` (``labelObject``); keys named by the spec."""
    category = spec["category"]
    wanted: dict[str, str] = {}
    script = []
    if category in ("xpath", "input"):
        for xpath, key in (spec.get("xpathObject") or spec.get("inputObject") or {}).items():
            prop = "value" if category == "input" else "textContent"
            script.append(f"[{json.dumps(key)}, (document.evaluate({json.dumps(xpath)}, document, null, 9, null)"
                          f".singleNodeValue || {{}}).{prop}]")
    elif category == "class":
        for name, key in (spec.get("class_singleObject") or {}).items():
            script.append(f"[{json.dumps(key)}, (document.getElementsByClassName({json.dumps(name)})[0] || {{}})"
                          ".textContent]")
        for name, ranks in (spec.get("class_multiObject") or {}).items():
            for rank, key in ranks.items():
                script.append(f"[{json.dumps(key)}, (document.getElementsByClassName({json.dumps(name)})"
                              f"[{int(rank)}] || {{}}).textContent]")
    elif category == "label":
        for label, key in (spec.get("labelObject") or {}).items():
            script.append(f"[{json.dumps(key)}, (Array.from(document.querySelectorAll('label')).find(l => "
                          f"l.textContent.includes({json.dumps(label)})) || {{}}).textContent]")
    try:
        answer = _ask(desktop, "evaluate", {"expression": f"[{', '.join(script)}]"})
    except EnvError:
        return None
    for key, text in answer.get("value") or []:
        wanted[key] = (text or "").strip()
    return wanted


def enable_do_not_track(desktop: Any, spec: dict) -> str:
    """"true" when the browser's preferences turn Do Not Track on (the profile OSWorld's VM uses:
    ~/.config/google-chrome, which the session's google-chrome uses too)."""
    path = Path(desktop.home) / ".config" / "google-chrome" / "Default" / "Preferences"
    try:
        return "true" if json.loads(path.read_text()).get("enable_do_not_track") else "false"
    except (OSError, ValueError, AttributeError):
        return "false"
