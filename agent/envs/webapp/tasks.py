"""Tasks of the ``webapp`` env: WebArena-format tasks on the local shop, and any-URL tasks on a team's own app.

**WebArena format** (a task a JSON object, or a file holding a list of them), the fields read:
``task_id``, ``intent``, ``start_url`` (with a site placeholder: ``__SHOP__`` / ``__SHOPPING__`` for the
shop, ``__SHOP_ADMIN__`` / ``__SHOPPING_ADMIN__`` for its staff dashboard, ``__WIKI__`` for the MediaWiki wiki), ``require_login`` (the seeded
customer, or the staff user for an admin site), ``eval`` with ``eval_types`` among:

- ``string_match``: ``reference_answers`` with ``exact_match`` (a string), ``must_include`` (a list) and/or
  ``fuzzy_match`` (a list, or ``"N/A"``) against the answer of ``finished(answer=...)``. WebArena asks
  an LLM for ``fuzzy_match``; here it is done without one: each reference must be contained in the answer or
  match it by difflib's ratio >= 0.8 after lower-casing (so a paraphrase that shares no wording fails).
- ``url_match``: ``reference_url`` (alternatives joined by `` |OR| ``): the page's path must contain the
  reference's path and its query must hold the reference's parameters (WebArena's "GOLD in PRED").
- ``program_html``: a list of ``{"url": "last" | URL, "locator": JS expression or "", "required_contents":
  {"exact_match": str} | {"must_include": [str, ...]}}``; the expression runs in that page (a URL other than
  ``last`` is opened in a second tab of the episode's browser, with its cookies). ``func:`` locators
  (WebArena's Python helpers for its own sites) are refused.
- ``site_state`` (Loupe's): checks that read the shop's own database after the episode, a list of
  ``{"check": "basket_line", "product": title, "quantity": n}``, ``{"check": "basket_empty"}``,
  ``{"check": "order_placed", "product": title, "quantity": n, "email": guest email}`` (all but the
  kind optional), ``{"check": "product_title", "upc": upc, "title": title}``, ``{"check": "product_price",
  "upc": upc, "price": "12.50"}``, and for the wiki ``{"check": "wiki_page", "title": title, "must_include":
  [...]}`` (the page's latest revision holds each text).

Scores of the listed types multiply (all must pass), as in WebArena. Unknown eval types, site checks,
placeholders and missing fields are refused at load with a message naming them.

**Any URL**: ``{"task_id", "start_url", "instruction", "check", "max_steps"?}`` where ``check`` is
``{"type": "url_match", "url": ..., "match": "exact" | "prefix" | "contains"}``, ``{"type": "dom_content",
"url": "last" | URL, "selector": CSS, "must_include": [...]}``, ``{"type": "judge"}`` or ``{"type":
"person"}`` (no automatic reward: the judge or a person gives the verdict later). The start URL must be http
or https on a host of ``LOUPE_WEBAPP_ALLOWED_HOSTS`` (default ``127.0.0.1,localhost``); the browser is
kept to those hosts and the local sites during the episode.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

__all__ = ["ANY_URL_CHECKS", "EVAL_TYPES", "SITE_CHECKS", "TaskFormatError", "WebTask", "allowed_hosts",
           "evaluate", "load_task", "load_task_file", "load_tasks_dir", "resolve_url"]

EVAL_TYPES = ("string_match", "url_match", "program_html", "site_state")
SITE_CHECKS = ("basket_line", "basket_empty", "order_placed", "product_title", "product_price", "wiki_page")
ANY_URL_CHECKS = ("url_match", "dom_content", "judge", "person")
STRING_MATCH_KINDS = ("exact_match", "must_include", "fuzzy_match")
# Placeholder -> (site, path under the site's base URL).
PLACEHOLDERS = {"__SHOP__": ("shop", ""), "__SHOPPING__": ("shop", ""),
                "__SHOP_ADMIN__": ("shop", "/dashboard"), "__SHOPPING_ADMIN__": ("shop", "/dashboard"),
                "__WIKI__": ("wiki", "")}
_NOT_SERVED = ("__REDDIT__", "__GITLAB__", "__WIKIPEDIA__", "__MAP__", "__HOMEPAGE__")
_PLACEHOLDER = re.compile(r"__[A-Z_]+__")
DEFAULT_MAX_STEPS = 30
FUZZY_RATIO = 0.8


class TaskFormatError(ValueError):
    """A task file that does not follow the format; the message names the task and what to fix."""


@dataclass(frozen=True)
class WebTask:
    task_id: str
    kind: str  # "webarena" | "any_url"
    start_url: str  # may hold placeholders; resolve_url() makes it a URL
    intent: str
    eval: dict = field(default_factory=dict)  # webarena: the eval object; any_url: the check
    login: str | None = None  # "customer" | "staff" | None
    max_steps: int = DEFAULT_MAX_STEPS
    origin: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)  # the task's JSON as given

    @property
    def sites(self) -> set[str]:
        """The local sites the task uses (from the placeholders in its start URL and checks)."""
        text = self.start_url + json.dumps(self.eval)
        return {PLACEHOLDERS[p][0] for p in _PLACEHOLDER.findall(text) if p in PLACEHOLDERS} | (
            {"wiki"} if "wiki_page" in text else set()) | ({"shop"} if self.kind == "webarena" and any(
                c.get("check") != "wiki_page" for c in self.eval.get("site_state", [])) else set())

    @property
    def automatic(self) -> bool:
        """False when the reward comes from the judge or a person, not from the env."""
        return not (self.kind == "any_url" and self.eval["type"] in ("judge", "person"))


def allowed_hosts() -> tuple[str, ...]:
    raw = os.environ.get("LOUPE_WEBAPP_ALLOWED_HOSTS", "127.0.0.1,localhost")
    return tuple(h.strip().lower() for h in raw.split(",") if h.strip())


def resolve_url(url: str, sites: dict[str, str]) -> str:
    """Replace a site placeholder by that site's base URL (``sites``: site name -> base URL)."""
    for placeholder, (site, path) in PLACEHOLDERS.items():
        if placeholder in url:
            url = url.replace(placeholder, sites[site].rstrip("/") + path)
    return url


# -- loading -----------------------------------------------------------------------------------
def load_task(data: Any, *, origin: str = "") -> WebTask:
    """Read one task (WebArena format or any-URL) from its JSON object; TaskFormatError if it is not one."""
    where = f" in {origin}" if origin else ""
    if not isinstance(data, dict):
        raise TaskFormatError(f"a webapp task must be a JSON object{where}, got {type(data).__name__}")
    name = data.get("task_id")
    label = f"task {str(name)!r}{where}" if name is not None else f"a task{where}"

    def fail(message: str) -> TaskFormatError:
        return TaskFormatError(f"{label}: {message}")

    if name is None or (isinstance(name, str) and not name.strip()) or not isinstance(name, (str, int)):
        raise fail("task_id is missing (a string or a number)")
    if "intent" in data or "eval" in data:
        return _load_webarena(data, str(name), origin, fail)
    if "instruction" in data or "check" in data:
        return _load_any_url(data, str(name), origin, fail)
    raise fail("neither a WebArena task (intent, eval) nor an any-URL task (instruction, check)")


def _require(data: dict, keys: tuple[str, ...], fail: Any) -> None:
    missing = [key for key in keys if key not in data or data[key] in (None, "")]
    if missing:
        raise fail(f"missing field{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")


def _max_steps(data: dict, fail: Any) -> int:
    value = data.get("max_steps", DEFAULT_MAX_STEPS)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 200:
        raise fail(f"max_steps must be a whole number from 1 to 200, got {value!r}")
    return value


def _check_placeholders(url: str, what: str, fail: Any) -> None:
    for placeholder in _PLACEHOLDER.findall(url):
        if placeholder in _NOT_SERVED:
            raise fail(f"{what} uses {placeholder}, a WebArena site not served here; served: "
                       f"{', '.join(PLACEHOLDERS)}")
        if placeholder not in PLACEHOLDERS:
            raise fail(f"{what} uses the unknown placeholder {placeholder}; known: {', '.join(PLACEHOLDERS)}")


def _load_webarena(data: dict, name: str, origin: str, fail: Any) -> WebTask:
    _require(data, ("intent", "start_url", "eval"), fail)
    start_url = data["start_url"]
    if not isinstance(start_url, str) or not _PLACEHOLDER.match(start_url):
        raise fail(f"start_url must begin with a site placeholder such as __SHOP__, got {start_url!r}")
    _check_placeholders(start_url, "start_url", fail)
    spec = data["eval"]
    if not isinstance(spec, dict):
        raise fail("eval must be an object with eval_types")
    types = spec.get("eval_types")
    if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
        raise fail("eval.eval_types must be a non-empty list of names")
    unknown = [t for t in types if t not in EVAL_TYPES]
    if unknown:
        raise fail(f"unsupported eval type{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                   f"supported: {', '.join(EVAL_TYPES)}")
    if "string_match" in types:
        answers = spec.get("reference_answers")
        if not isinstance(answers, dict) or not any(answers.get(k) not in (None, "", []) for k in STRING_MATCH_KINDS):
            raise fail("string_match needs reference_answers with exact_match, must_include or fuzzy_match")
        unknown = [k for k in answers if k not in STRING_MATCH_KINDS and answers[k] not in (None, "", [])]
        if unknown:
            raise fail(f"unknown reference_answers kind {', '.join(unknown)}; known: {', '.join(STRING_MATCH_KINDS)}")
    if "url_match" in types:
        ref = spec.get("reference_url")
        if not isinstance(ref, str) or not ref.strip():
            raise fail("url_match needs eval.reference_url")
        _check_placeholders(ref, "reference_url", fail)
    if "program_html" in types:
        targets = spec.get("program_html")
        if not isinstance(targets, list) or not targets:
            raise fail("program_html needs a non-empty list of {url, locator, required_contents}")
        for i, target in enumerate(targets):
            _check_program_html(target, f"program_html[{i}]", fail)
    if "site_state" in types:
        checks = spec.get("site_state")
        if not isinstance(checks, list) or not checks:
            raise fail("site_state needs a non-empty list of checks")
        for i, check in enumerate(checks):
            _check_site_check(check, f"site_state[{i}]", fail)
    sites = data.get("sites") or []
    login = None
    if data.get("require_login"):
        login = "staff" if any("admin" in str(s) for s in sites) or "ADMIN__" in start_url else "customer"
    return WebTask(task_id=name, kind="webarena", start_url=start_url, intent=str(data["intent"]), eval=spec,
                   login=login, max_steps=_max_steps(data, fail), origin=origin, raw=data)


def _check_program_html(target: Any, where: str, fail: Any) -> None:
    if not isinstance(target, dict):
        raise fail(f"{where} must be an object with url, locator and required_contents")
    url, locator, contents = target.get("url"), target.get("locator", ""), target.get("required_contents")
    if not isinstance(url, str) or not url:
        raise fail(f"{where}.url is missing ('last' for the page the episode ended on)")
    if url != "last":
        _check_placeholders(url, f"{where}.url", fail)
        if url.startswith("func:"):
            raise fail(f"{where}.url {url!r}: WebArena's func: helpers are not supported")
    if not isinstance(locator, str):
        raise fail(f"{where}.locator must be a JavaScript expression (or empty for the page's text)")
    if locator.startswith("func:"):
        raise fail(f"{where}.locator {locator!r}: WebArena's func: helpers are not supported; use a JavaScript "
                   "expression such as document.querySelector('...').outerText")
    if not isinstance(contents, dict) or not (
            isinstance(contents.get("exact_match"), str) or isinstance(contents.get("must_include"), list)):
        raise fail(f"{where}.required_contents needs exact_match (a string) or must_include (a list)")


_SITE_CHECK_FIELDS = {"basket_line": ("product",), "basket_empty": (), "order_placed": (),
                      "product_title": ("upc", "title"), "product_price": ("upc", "price"),
                      "wiki_page": ("title", "must_include")}


def _check_site_check(check: Any, where: str, fail: Any) -> None:
    if not isinstance(check, dict) or "check" not in check:
        raise fail(f"{where} must be an object with a 'check' kind")
    kind = check["check"]
    if kind not in SITE_CHECKS:
        raise fail(f"{where}: unknown site check {kind!r}; known: {', '.join(SITE_CHECKS)}")
    missing = [k for k in _SITE_CHECK_FIELDS[kind] if check.get(k) in (None, "")]
    if missing:
        raise fail(f"{where} ({kind}) is missing {', '.join(missing)}")
    if "quantity" in check and (not isinstance(check["quantity"], int) or check["quantity"] < 1):
        raise fail(f"{where}: quantity must be a whole number of at least 1")
    if kind == "wiki_page" and (not isinstance(check["must_include"], list)
                                or not all(isinstance(x, str) for x in check["must_include"])):
        raise fail(f"{where}: wiki_page's must_include must be a list of texts")
    if kind == "product_price":
        try:
            Decimal(str(check["price"]))
        except InvalidOperation:
            raise fail(f"{where}: price {check['price']!r} is not a number") from None


def validate_url(url: Any, what: str, fail: Any) -> None:
    if not isinstance(url, str) or not url.strip():
        raise fail(f"{what} is missing")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(f"{what} {url!r} is not a web address: it must start with http:// or https:// and name a host")
    if parts.username or parts.password:
        raise fail(f"{what} {url!r} holds a user name or password; put logins in the task's setup, not the URL")
    hosts = allowed_hosts()
    if parts.hostname.lower() not in hosts:
        raise fail(f"{what} {url!r}: the host {parts.hostname} is not allowed; allowed hosts: {', '.join(hosts)} "
                   "(LOUPE_WEBAPP_ALLOWED_HOSTS)")


def _load_any_url(data: dict, name: str, origin: str, fail: Any) -> WebTask:
    _require(data, ("instruction", "start_url", "check"), fail)
    validate_url(data["start_url"], "start_url", fail)
    check = data["check"]
    if not isinstance(check, dict) or "type" not in check:
        raise fail(f"check must be an object with a type among {', '.join(ANY_URL_CHECKS)}")
    kind = check["type"]
    if kind not in ANY_URL_CHECKS:
        raise fail(f"unknown check type {kind!r}; known: {', '.join(ANY_URL_CHECKS)}")
    if kind == "url_match":
        validate_url(check.get("url"), "check.url", fail)
        if check.get("match", "exact") not in ("exact", "prefix", "contains"):
            raise fail(f"check.match must be exact, prefix or contains, got {check.get('match')!r}")
    if kind == "dom_content":
        if check.get("url", "last") != "last":
            validate_url(check.get("url"), "check.url", fail)
        if not isinstance(check.get("selector"), str) or not check["selector"].strip():
            raise fail("a dom_content check needs a CSS selector")
        needed = check.get("must_include")
        if not isinstance(needed, list) or not needed or not all(isinstance(x, str) for x in needed):
            raise fail("a dom_content check needs must_include: a non-empty list of texts")
    return WebTask(task_id=name, kind="any_url", start_url=data["start_url"], intent=str(data["instruction"]),
                   eval=check, max_steps=_max_steps(data, fail), origin=origin, raw=data)


def load_task_file(path: str | Path) -> list[WebTask]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskFormatError(f"{path}: not a readable JSON file ({exc})") from exc
    items = data if isinstance(data, list) else [data]
    tasks = [load_task(item, origin=path.name) for item in items]
    seen: set[str] = set()
    for task in tasks:
        if task.task_id in seen:
            raise TaskFormatError(f"{path.name}: task_id {task.task_id!r} appears twice")
        seen.add(task.task_id)
    return tasks


def load_tasks_dir(folder: str | Path) -> dict[str, WebTask]:
    tasks: dict[str, WebTask] = {}
    for path in sorted(Path(folder).glob("*.json")):
        for task in load_task_file(path):
            if task.task_id in tasks:
                raise TaskFormatError(f"task_id {task.task_id!r} is in {tasks[task.task_id].origin} and {path.name}")
            tasks[task.task_id] = task
    return tasks


# -- evaluation --------------------------------------------------------------------------------
class Probe(Protocol):
    """What evaluation reads from a finished episode (the env provides it)."""

    url: str  # the page the episode ended on
    dbs: dict[str, Path]  # site -> the episode's database of that site

    def dom(self, url: str, locator: str) -> str: ...  # run a JS expression on a page ("last": the current one)

    def select(self, url: str, selector: str) -> str: ...  # the text of the elements a CSS selector matches


def _clean(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().strip("\"'").lower()


def _alternatives(value: str) -> list[str]:
    return [v.strip() for v in value.split(" |OR| ")]


def string_match(answer: str, reference: dict) -> float:
    pred = _clean(answer)
    score = 1.0
    if reference.get("exact_match") not in (None, ""):
        score *= float(pred == _clean(reference["exact_match"]))
    for item in reference.get("must_include") or []:
        score *= float(any(_clean(alt) in pred for alt in _alternatives(item)))
    fuzzy = reference.get("fuzzy_match")
    if fuzzy == "N/A":
        score *= float(pred in ("n/a", "na", "not applicable"))
    elif fuzzy:
        for item in fuzzy if isinstance(fuzzy, list) else [fuzzy]:
            ref = _clean(item)
            score *= float(ref in pred or difflib.SequenceMatcher(None, ref, pred).ratio() >= FUZZY_RATIO)
    return score


def url_match(url: str, reference: str) -> float:
    pred = urlsplit(url)
    pred_query = parse_qs(pred.query)
    for alt in _alternatives(reference):
        ref = urlsplit(alt)
        if ref.netloc and ref.netloc != pred.netloc:
            continue
        if ref.path.rstrip("/") not in pred.path.rstrip("/") and ref.path.rstrip("/") != pred.path.rstrip("/"):
            continue
        if all(set(values) <= set(pred_query.get(key, [])) for key, values in parse_qs(ref.query).items()):
            return 1.0
    return 0.0


def _contents_match(text: str, contents: dict) -> bool:
    if isinstance(contents.get("exact_match"), str):
        return _clean(text) == _clean(contents["exact_match"])
    return all(any(_clean(alt) in _clean(text) for alt in _alternatives(item)) for item in contents["must_include"])


def site_check(dbs: dict[str, Path], check: dict) -> bool:
    kind = check["check"]
    db = dbs.get("wiki" if kind == "wiki_page" else "shop")
    if db is None or not db.exists():
        return False
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        if kind == "wiki_page":
            row = conn.execute(
                "SELECT t.old_text FROM page p JOIN slots s ON s.slot_revision_id = p.page_latest "
                "JOIN content c ON c.content_id = s.slot_content_id "
                "JOIN text t ON 'tt:' || t.old_id = c.content_address "
                "WHERE p.page_namespace = 0 AND p.page_title = ?", (check["title"].strip().replace(" ", "_"),)).fetchone()
            text = bytes(row[0]).decode("utf-8", "replace") if row and isinstance(row[0], bytes) else (row[0] if row else None)
            return text is not None and all(_clean(item) in _clean(text) for item in check["must_include"])
        if kind in ("basket_line", "basket_empty"):
            rows = conn.execute(
                "SELECT p.title, l.quantity FROM basket_line l JOIN basket_basket b ON b.id = l.basket_id "
                "JOIN catalogue_product p ON p.id = l.product_id WHERE b.status = 'Open'").fetchall()
            if kind == "basket_empty":
                return not rows
            lines = [q for title, q in rows if _clean(title) == _clean(check["product"])]
            return bool(lines) and ("quantity" not in check or sum(lines) == check["quantity"])
        if kind == "order_placed":
            orders = conn.execute("SELECT id, guest_email FROM order_order").fetchall()
            for order_id, email in orders:
                if check.get("email") and _clean(email or "") != _clean(check["email"]):
                    continue
                if not check.get("product"):
                    return True
                lines = conn.execute("SELECT title, quantity FROM order_line WHERE order_id = ?", (order_id,)).fetchall()
                qty = sum(q for title, q in lines if _clean(title) == _clean(check["product"]))
                if qty and ("quantity" not in check or qty == check["quantity"]):
                    return True
            return False
        if kind == "product_title":
            row = conn.execute("SELECT title FROM catalogue_product WHERE upc = ?", (check["upc"],)).fetchone()
            return row is not None and _clean(row[0]) == _clean(check["title"])
        if kind == "product_price":
            row = conn.execute("SELECT s.price FROM partner_stockrecord s JOIN catalogue_product p "
                               "ON p.id = s.product_id WHERE p.upc = ?", (check["upc"],)).fetchone()
            return row is not None and row[0] is not None and Decimal(str(row[0])) == Decimal(str(check["price"]))
    raise AssertionError(f"unchecked site check {kind}")  # load_task refuses unknown kinds


def evaluate(task: WebTask, probe: Probe, *, answer: str | None, sites: dict[str, str]) -> float | None:
    """Score a finished episode 0..1; None for a judge or person check (no automatic reward)."""
    if task.kind == "any_url":
        check = task.eval
        if check["type"] in ("judge", "person"):
            return None
        if check["type"] == "url_match":
            want, match = check["url"], check.get("match", "exact")
            got = probe.url
            ok = {"exact": got.rstrip("/") == want.rstrip("/"), "prefix": got.startswith(want),
                  "contains": want in got}[match]
            return float(ok)
        text = probe.select(check.get("url", "last"), check["selector"])
        return float(all(_clean(item) in _clean(text) for item in check["must_include"]))
    spec, score = task.eval, 1.0
    for kind in spec["eval_types"]:
        if kind == "string_match":
            score *= string_match(answer or "", spec["reference_answers"])
        elif kind == "url_match":
            score *= url_match(probe.url, resolve_url(spec["reference_url"], sites))
        elif kind == "program_html":
            for target in spec["program_html"]:
                url = target["url"] if target["url"] == "last" else resolve_url(target["url"], sites)
                text = probe.dom(url, target.get("locator") or "")
                score *= float(_contents_match(text, target["required_contents"]))
        elif kind == "site_state":
            score *= float(all(site_check(probe.dbs, check) for check in spec["site_state"]))
        if not score:
            break
    return score
