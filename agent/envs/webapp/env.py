"""The ``webapp`` env kind: a real multi-page site in Chromium at 1280x720, reset per episode.

- ``reset(task, seed)``: ``task`` is a task id (the shipped WebArena-format shop tasks, a team's task files in
  ``LOUPE_WEBAPP_TASKS_DIR``, or tasks given to the constructor; any-URL ones among them); the seed is unused (the tasks are fixed, as in WebArena). For a
  shop task the golden database is copied (the episode's own file; nothing of the last episode is left),
  the env's shop server is started once and reused, the browser context is new (no cookies, no basket
  from before), the task's login is done if it asks for one, then the start URL is opened.
- The browser is MiniWoB's (``MiniWoBEnv``'s lifecycle: one Chromium a env, in its sandbox, through the
  per-thread Playwright driver, a new context per episode, CDP screenshots) at a realistic viewport; the elements
  are read by the same DOM walk, limited to what is in the viewport.
- The shop and wiki servers run in the browser's sandbox network namespace (as Loupe's user, with its files),
  so the browser reaches them on its own loopback, and nothing else of the machine. Any other address goes
  through the env's egress proxy (egress.py): an any-URL task's pages reach the hosts of
  ``LOUPE_WEBAPP_ALLOWED_HOSTS``, on the loopback only at the ports the task's URLs name, and never Loupe's Redis or
  PostgreSQL; a shop or wiki task reaches nothing outside. Requests to hosts other than the local sites and the
  allowed hosts are refused (``info["error"]`` says so when a step tried).
- Actions: the grammar's click, double/right click, drag, type, hotkey, scroll (a third of the screen a
  notch) and wait; after each, the env waits for a navigation it started to load. ``finished(answer=...)``
  ends the episode and scores it (tasks.evaluate; a judge or person check gives reward 0 and
  ``info["verdict"]`` says who decides). ``evaluate()`` scores the current state without ending it.
- A site that does not answer, or a shop that cannot start, raises EnvError with the reason.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.actions import Action
from agent.envs.base import Element, EnvError, Observation, StepResult, TaskInfo
from agent.envs.browser import CHROMIUM_PATH, ELEMENTS_JS
from agent.envs.egress import EgressProxy, EgressRules
from agent.envs.miniwob import MiniWoBEnv
from agent.envs.sandbox import Limits
from agent.envs.webapp import sites as site_build
from agent.envs.webapp.tasks import (
    TaskFormatError,
    WebTask,
    allowed_hosts,
    evaluate,
    load_task,
    load_tasks_dir,
    resolve_url,
)

__all__ = ["TASKS", "TASKS_DIR", "WEBAPP_TASKS", "WebAppEnv"]

TASKS_DIR = Path(__file__).with_name("tasks")


def _all_tasks() -> dict[str, WebTask]:
    """The shipped shop tasks, and a team's own (WebArena-format or any-URL JSON files) from LOUPE_WEBAPP_TASKS_DIR."""
    tasks = load_tasks_dir(TASKS_DIR)
    extra = os.environ.get("LOUPE_WEBAPP_TASKS_DIR", "")
    if extra:
        if not Path(extra).is_dir():
            raise TaskFormatError(f"LOUPE_WEBAPP_TASKS_DIR {extra} is not a folder")
        own = load_tasks_dir(extra)
        clash = sorted(set(own) & set(tasks))
        if clash:
            raise TaskFormatError(f"LOUPE_WEBAPP_TASKS_DIR: task ids {', '.join(clash)} are shipped tasks' ids; rename them")
        tasks.update(own)
    return tasks


WEBAPP_TASKS: dict[str, WebTask] = _all_tasks()
TASKS: dict[str, TaskInfo] = {
    task_id: TaskInfo(task_id, task.max_steps, task.intent[:80]) for task_id, task in WEBAPP_TASKS.items()
}


# Counts, in the page, the navigations it starts (before their request leaves): see WebAppEnv._settle.
_LEAVING_JS = """
window.__loupeLeaving = 0;
if (window.navigation) {
  window.navigation.addEventListener('navigate', (e) => {
    if (!e.hashChange && !(e.destination && e.destination.sameDocument)) window.__loupeLeaving += 1;
  });
}
window.addEventListener('beforeunload', () => { window.__loupeLeaving += 1; });
"""


def egress_rules(spec: WebTask) -> EgressRules:
    """Where an episode's pages may connect besides the env's own sites: an any-URL task's allowed hosts, on the
    loopback only at the ports its URLs name (so not Loupe's web server, nor anything else listening there);
    nothing for a shop or wiki task."""
    if spec.kind != "any_url":
        return EgressRules()
    ports = set()
    for url in (spec.start_url, spec.eval.get("url")):
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            parts = urlsplit(url)
            try:
                ports.add(parts.port or (443 if parts.scheme == "https" else 80))
            except ValueError:  # a port out of range: the loader refuses the URL first
                continue
    return EgressRules(hosts=frozenset(allowed_hosts()), loopback_ports=frozenset(ports))


class _Probe:
    """What tasks.evaluate reads from the episode: the current URL, pages' DOM, the shop's database."""

    def __init__(self, env: WebAppEnv) -> None:
        self.env = env
        self.url = env._page.url
        self.dbs = {"shop": env._db, "wiki": env._wiki_data / "wiki.sqlite" if env._wiki_data else None}
        self.dbs = {site: path for site, path in self.dbs.items() if path is not None}

    def _on(self, url: str, read: Any) -> Any:
        if url == "last":
            return read(self.env._page)
        page = self.env._context.new_page()
        try:
            page.goto(url, wait_until="load")
            return read(page)
        finally:
            page.close()

    def dom(self, url: str, locator: str) -> str:
        expression = locator or "document.body.outerText"
        script = f"() => {{ try {{ const v = ({expression}); return v == null ? '' : String(v); }} " \
                 "catch (e) { return ''; } }"
        return self._on(url, lambda page: page.evaluate(script))

    def select(self, url: str, selector: str) -> str:
        return self._on(url, lambda page: " ".join(page.locator(selector).all_inner_texts()))


class WebAppEnv(MiniWoBEnv):
    """Local sites and any-URL tasks in Chromium; see the module docstring."""

    kind = "webapp"

    def __init__(self, *, width: int = 1280, height: int = 720, executable_path: str = CHROMIUM_PATH,
                 jpeg_quality: int = 80, max_elements: int = 150, settle_ms: int = 50, wait_ms: int = 500,
                 nav_timeout_s: float = 15.0, tasks: dict[str, WebTask] | None = None,
                 golden: Path | None = None, limits: Limits | None = None) -> None:
        super().__init__(executable_path=executable_path, fresh_context=True, jpeg_quality=jpeg_quality,
                         wait_ms=wait_ms, ready_timeout_s=nav_timeout_s, max_elements=max_elements, limits=limits)
        self.width, self.height = width, height
        self.settle_ms = settle_ms
        self.tasks = {**WEBAPP_TASKS, **(tasks or {})}
        self.golden = golden
        self._workdir: Path | None = None
        self._server: site_build.ShopServer | None = None
        self._db: Path | None = None
        self.wiki_golden: Path | None = None
        self._wiki: site_build.WikiServer | None = None
        self._wiki_data: Path | None = None
        self._task: WebTask | None = None  # type: ignore[assignment] - a WebTask here, a name in MiniWoBEnv
        self._blocked: list[str] = []
        self._answer: str | None = None
        self._navigating = False
        self._settled = 0  # navigations of the main frame that committed or failed
        self._egress: EgressProxy | None = None

    # -- sites -----------------------------------------------------------------------------
    @property
    def sites(self) -> dict[str, str]:
        """Site name -> base URL of the sites this env serves now."""
        servers = {"shop": self._server, "wiki": self._wiki}
        return {name: server.url for name, server in servers.items() if server is not None and server.url}

    @property
    def server_pid(self) -> int | None:
        return self._server.pid if self._server else None

    @property
    def wiki_pid(self) -> int | None:
        return self._wiki.pid if self._wiki else None

    serves_task_pages = False  # its sites are the shop and the wiki

    def _ensure_sandbox(self) -> None:
        """The browser's sandbox (MiniWoBEnv's) and the env's egress proxy listening in it; a new sandbox starts the
        sites again, in its network namespace."""
        if self._confined_ready() and self._egress is not None:
            return
        super()._ensure_sandbox()
        if self.sandbox is not None:
            listener = self.sandbox.listen()
        else:  # no sandbox here: the proxy is on the worker's loopback, and Chromium's proxy settings are the guard
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(128)
        self._egress = EgressProxy(listener)

    def _close_sandbox(self) -> None:
        for server in (self._server, self._wiki):  # they serve in the sandbox's network namespace
            if server is not None:
                server.stop()
        self._server = self._wiki = None
        if self._egress is not None:
            self._egress.close()
            self._egress = None
        super()._close_sandbox()

    def _work(self) -> Path:
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="loupe-webapp-"))
        return self._workdir

    def _ensure_shop(self) -> None:
        if self.golden is None:
            self.golden, _ = site_build.build_oscar(quiet=True)
        self._db = self._work() / "shop.sqlite3"
        site_build.copy_database(self.golden / "golden.sqlite3", self._db)
        if self._server is None or not self._server.alive():
            if self._server is not None:
                self._server.stop()
            self._server = site_build.ShopServer(data=self.golden, db=self._db, log=self._work() / "server.log",
                                                 enter=self.sandbox.network_prefix() if self.sandbox else None)
            self._server.start()

    def _ensure_wiki(self) -> None:
        if self.wiki_golden is None:
            try:
                self.wiki_golden, _ = site_build.build_wiki(quiet=True)
            except site_build.SiteBuildError as exc:
                raise EnvError(str(exc)) from exc
        self._wiki_data = self._work() / "wiki"
        site_build.copy_wiki(self.wiki_golden, self._wiki_data)
        if self._wiki is None or not self._wiki.alive():
            if self._wiki is not None:
                self._wiki.stop()
            self._wiki = site_build.WikiServer(golden=self.wiki_golden, data=self._wiki_data,
                                               log=self._work() / "wiki.log", sandbox=self.sandbox)
            self._wiki.start()

    def _allowed(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        return (parts.hostname or "").lower() in allowed_hosts() + ("127.0.0.1",)

    def _route(self, route: Any) -> None:
        if self._allowed(route.request.url):
            route.continue_()
        else:
            self._blocked.append(route.request.url)
            if route.request.is_navigation_request():
                route.fulfill(status=204)  # No Content: the browser stays on the page it was on
                self._settled += 1
            else:
                route.abort("blockedbyclient")

    # -- episodes --------------------------------------------------------------------------
    def add_task(self, definition: dict) -> str:
        """Register a task given as its JSON (WebArena format or any-URL), for reset() by its id, which is returned.
        TaskFormatError when the loader refuses it, or when it takes a shipped task's id with other JSON."""
        task = load_task(definition, origin="authored")
        shipped = WEBAPP_TASKS.get(task.task_id)
        if shipped is not None and shipped.raw != definition:
            raise TaskFormatError(f"task {task.task_id!r}: the id of a shipped task; give yours another id")
        self.tasks[task.task_id] = task
        return task.task_id

    def reset(self, task: str, seed: int) -> Observation:
        if task not in self.tasks:
            raise EnvError(f"unknown webapp task {task!r}; registered: {', '.join(self.tasks)}")
        spec = self.tasks[task]
        self._done, self._task, self._answer = True, spec, None
        self._close_context()  # first: a request of the last episode's page must not write into the new copy
        self._ensure_sandbox()  # the sites serve in its network namespace
        sites = spec.sites
        if "shop" in sites:
            self._ensure_shop()
        if "wiki" in sites:
            self._ensure_wiki()
        for attempt in (1, 2):  # a browser that died since the last episode is replaced once
            self._ensure_browser()
            try:
                return self._start_episode(spec)
            except EnvError:
                self._close_context()
                raise
            except Exception as exc:
                self._drop_browser()
                if attempt == 2:
                    raise EnvError(f"could not start {task}: {exc}") from exc
        raise AssertionError("unreachable")

    def _start_episode(self, spec: WebTask) -> Observation:  # type: ignore[override]
        self._close_context()
        self._blocked, self._navigating = [], False
        assert self._egress is not None
        self._egress.rules, self._egress.refused, self._egress.failed = egress_rules(spec), [], {}
        # every address but the env's own sites goes through the egress proxy (Playwright sends the loopback there
        # too: "<-loopback>"), which connects only where the task may go
        own = ",".join(urlsplit(url).netloc for url in self.sites.values())
        self._context = self._browser.new_context(viewport={"width": self.width, "height": self.height},
                                                  device_scale_factor=1,
                                                  proxy={"server": self._egress.url, "bypass": own or None})
        self._context.set_default_timeout(self.ready_timeout_s * 1000)
        self._context.route("**/*", self._route)
        self._context.add_init_script(_LEAVING_JS)
        self._page = self._context.new_page()
        self._watch(self._page)
        if spec.login:
            self._login(spec.login)
        url = resolve_url(spec.start_url, self.sites)
        self._goto(url)
        self._cdp = self._context.new_cdp_session(self._page)
        self._instruction = spec.intent
        self._done = False
        return self._observe_page()

    def _goto(self, url: str) -> None:
        try:
            response = self._page.goto(url, wait_until="load")
        except Exception as exc:  # noqa: BLE001 - Playwright's errors say what the network said
            reason = str(exc).splitlines()[0]
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            if self._egress is not None and (said := self._egress.failed.get(((parts.hostname or "").lower(), port))):
                reason = said  # what the egress proxy met, rather than Chromium's "the proxy failed"
            elif self._egress is not None and self._egress.refused:
                reason = f"the sandbox keeps the browser from {self._egress.refused[-1]}"
            raise EnvError(f"the site at {url} does not answer: {reason}") from exc
        if response is not None and response.status >= 400:
            raise EnvError(f"the site at {url} answered HTTP {response.status}")

    def _login(self, who: str) -> None:
        email, password = site_build.STAFF_LOGIN if who == "staff" else site_build.CUSTOMER_LOGIN
        self._goto(self.sites["shop"] + "/accounts/login/")
        self._page.fill("#id_login-username", email)
        self._page.fill("#id_login-password", password)
        with self._page.expect_navigation(wait_until="load"):
            self._page.click("button[name=login_submit]")
        if "/accounts/login/" in self._page.url:
            raise EnvError(f"the shop refused the seeded {who} login ({email})")

    def close(self) -> None:
        super().close()
        for server in (self._server, self._wiki):
            if server is not None:
                server.stop()
        self._server = self._wiki = None
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    # -- observation -----------------------------------------------------------------------
    def _observe_page(self) -> Observation:
        page = self._page
        for attempt in range(4):
            try:
                raw = page.evaluate(ELEMENTS_JS, [self.width, self.height, self.max_elements])
                break
            except Exception as exc:  # noqa: BLE001 - a navigation replaced the document under us
                if attempt == 3 or "context was destroyed" not in str(exc) and "navigat" not in str(exc):
                    raise
                page.wait_for_load_state("load")
        elements = [
            Element(role=e["role"], text=e["text"], x=e["x"], y=e["y"], width=e["width"], height=e["height"],
                    checked=e.get("checked"), focused=bool(e.get("focused")))
            for e in raw
        ]
        return Observation(instruction=self._instruction, url=page.url, screenshot=self._screenshot(),
                           width=self.width, height=self.height, elements=elements)

    def _settle(self, settled_before: int) -> None:
        """Wait for what an action started: a navigation (a link, a submitted form and its redirects) to
        commit and load. Playwright's load state alone would answer for the old page while a slow POST is
        still on its way, and the elements would be read from it, or from a half-styled new one. A
        navigation counts as started when its request was seen or the page says it is leaving (the
        Navigation API's navigate event, beforeunload: these fire in the page before any request, so a
        loaded machine cannot hide them), and as settled when a new document committed or it failed."""
        page = self._page
        page.wait_for_timeout(self.settle_ms)  # Playwright delivers the page's events while it waits
        if self._settled == settled_before and not self._navigating and not self._leaving():
            return
        deadline = time.monotonic() + self.ready_timeout_s
        while self._settled == settled_before and time.monotonic() < deadline:
            page.wait_for_timeout(25)
        try:
            page.wait_for_load_state("load")
        except Exception:  # noqa: BLE001 - a page still loading after the timeout is observed as it is
            pass

    def _leaving(self) -> bool:
        try:
            return bool(self._page.evaluate("() => (window.__loupeLeaving || 0) > 0"))
        except Exception:  # noqa: BLE001 - the document is being replaced: a navigation is under way
            return True

    def _watch(self, page: Any) -> None:
        """Track navigations of the page's main frame: started (a request) until settled (committed or failed)."""
        def on_request(request: Any) -> None:
            if request.is_navigation_request() and request.frame == page.main_frame:
                self._navigating = True

        def on_settled(frame: Any) -> None:
            if frame == page.main_frame:
                self._navigating = False
                self._settled += 1

        page.on("request", on_request)
        page.on("framenavigated", on_settled)
        page.on("requestfailed", lambda request: on_settled(request.frame) if request.is_navigation_request()
                else None)

    def _follow_new_tab(self) -> None:
        """A link that opened a tab: the episode goes on in the newest page."""
        pages = [p for p in self._context.pages if not p.is_closed()]
        if pages and pages[-1] is not self._page:
            self._page = pages[-1]
            self._watch(self._page)
            self._page.wait_for_load_state("load")
            self._cdp = self._context.new_cdp_session(self._page)

    # -- steps -----------------------------------------------------------------------------
    def step(self, action: Action) -> StepResult:
        if self._page is None or self._task is None:
            raise EnvError("step() before reset(): start an episode first")
        if self._done:
            raise EnvError("step() after the episode ended; call reset() to start a new one")
        info: dict[str, Any] = {}
        try:
            error = self._off_screen(action)
            if error:
                info["error"] = error
            elif action.name == "scroll":
                self._scroll(action)
            elif action.name not in ("finished", "call_user"):
                before, settled = len(self._blocked), self._settled
                refused = len(self._egress.refused) if self._egress else 0
                info.update(self._perform(action))
                if action.name != "type":  # typing into a field does not navigate; a click or Enter may
                    self._settle(settled)
                    self._follow_new_tab()
                if len(self._blocked) > before:
                    info["error"] = (f"the browser was kept from {self._blocked[-1]}: only the local sites and "
                                     f"{', '.join(allowed_hosts())} are allowed")
                elif self._egress is not None and len(self._egress.refused) > refused:
                    info["error"] = f"the sandbox kept the browser from {self._egress.refused[-1]}"
            else:
                info.update(self._perform(action))
            observation = self._observe_page()
        except EnvError:
            raise
        except Exception as exc:
            self._done = True
            self._drop_browser()
            raise EnvError(
                f"the browser failed during {action.to_text()} in {self._task.task_id}: {exc}. "
                "The episode is lost; the next reset() starts a new browser."
            ) from exc
        reward, done = 0.0, False
        if action.name == "finished":
            done = True
            self._answer = action.args["answer"]
            score = self.evaluate(answer=self._answer)
            if score is None:
                info["verdict"] = self._task.eval["type"]  # "judge" or "person" decides
            else:
                reward = score
        self._done = done
        return StepResult(observation=observation, reward=reward, done=done, info=info)

    def evaluate(self, *, answer: str | None = None) -> float | None:
        """Score the episode's current state (0..1), or None when the judge or a person decides."""
        if self._task is None or self._page is None:
            raise EnvError("evaluate() before reset()")
        return evaluate(self._task, _Probe(self), answer=answer, sites=self.sites)

    def _off_screen(self, action: Action) -> str | None:  # type: ignore[override]
        a = action.args
        points = [(a["x1"], a["y1"]), (a["x2"], a["y2"])] if action.name == "drag" else (
            [(a["x"], a["y"])] if "x" in a else [])
        for x, y in points:
            if not (0 <= x < self.width and 0 <= y < self.height):
                return f"{action.name} at ({x}, {y}) is outside the {self.width}x{self.height} screenshot"
        return None

    def _scroll(self, action: Action) -> None:
        a, step = action.args, self.height // 3
        dx = {"left": -step, "right": step}.get(a["direction"], 0)
        dy = {"up": -step, "down": step}.get(a["direction"], 0)
        self._page.mouse.move(a["x"], a["y"])
        self._page.mouse.wheel(dx, dy)
        self._page.wait_for_timeout(100)  # wheel scrolling is applied asynchronously
