"""MiniWoB++ tasks in the system Chromium, driven by Playwright's sync API.

- The task pages come from the ``miniwob`` PyPI package, served over HTTP (miniwob_pages.py); the browser, its
  Playwright driver and the script that reads a page's elements are shared with the webapp env (browser.py).
- The browser runs in a sandbox of its own (sandbox.py): a network namespace where only the env's own pages
  are served (a thread of the worker answers on a socket made inside it), Loupe's files hidden, its own uid
  under root, CPU, memory and process limits. Playwright launches it through a small script that enters the
  sandbox (the CDP pipe passes through). Where no sandbox can be made, the browser runs as the worker's user,
  said once in the log, its pages served on the worker's loopback.
- One browser process per ``MiniWoBEnv`` (shared by its episodes). By default every episode loads
  its task page afresh, with the context's cookies and the pages' site data cleared first, so
  cookies, storage, focus and page state never leak from one episode into the next (a page that
  cannot be reloaded is replaced with a new context); ``fresh_context=False`` restarts episodes of
  the same task inside the loaded page instead (MiniWoB++'s own harness does this), which is
  cheaper still and gives the same seeded episode.
- The observation: the JPEG screenshot, the instruction (``core.getUtterance()``), and the
  visible elements read from the DOM in document order: buttons, links, tabs, text boxes,
  passwords (shown as one ``*`` a character, as on screen), checkboxes and radios (with their
  label and checked state) and plain text, each with its centre in screenshot pixels.
- The screenshot is the viewport, and the viewport is the 160x210 ``#wrap`` task area at its
  natural size (device scale 1; the harness panels to its right are hidden, scrollbars too). A
  pixel ``(x, y)`` of the screenshot is viewport CSS pixel ``(x, y)``, so actions map exactly onto
  ``page.mouse``, even after the page scrolls.
- Seeded episodes: load the page, then ``Math.seedrandom(seed); core.startEpisodeReal()``. The
  page's own episode timer (10 s by default, with a time-proportional reward) is replaced by
  ``episode_max_ms`` before the episode starts: a model on a CPU, or a person supervising it, is
  much slower than the timer assumes. The default disables it; ``max_steps`` bounds episodes.
- Playwright's sync API is bound to the thread that started it: use an env from one thread.
"""

from __future__ import annotations

import base64
import logging
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.actions import Action
from agent.envs.base import Element, Env, EnvError, LiveFrame, Observation, StepResult, TaskInfo
from agent.envs.browser import CHROMIUM_ARGS, CHROMIUM_PATH, ELEMENTS_JS, Driver, playwright_key, say_unconfined
from agent.envs.miniwob_pages import PageServer, miniwob_html_dir, serve_miniwob
from agent.envs.sandbox import Limits, Sandbox, allocate_uid, support

__all__ = ["TASKS", "MiniWoBEnv"]

log = logging.getLogger(__name__)

WIDTH, HEIGHT = 160, 210
_HIDE_HARNESS_CSS = "#reward-display, #click-canvas, #attention-canvas { display: none !important; }"
_NO_TIMEOUT_MS = 2**31 - 1  # the largest delay setTimeout accepts; larger ones fire at once
LIVE_JPEG_QUALITY = 60  # the live view's screencast frames (people watching; the model's screenshots keep theirs)
LIVE_PUMP_MS = 15  # how long live_frame lets Playwright deliver the screencast's frames

TASKS: dict[str, TaskInfo] = {
    info.name: info
    for info in [
        TaskInfo("click-test", 3, "click the one button"),
        TaskInfo("click-test-2", 3, "click button ONE, not TWO"),
        TaskInfo("click-button", 3, "click the button with the named text"),
        TaskInfo("click-link", 3, "click the link with the named text"),
        TaskInfo("click-dialog", 3, "close a dialog with its x button"),
        TaskInfo("click-tab", 3, "click the named tab"),
        TaskInfo("click-checkboxes", 10, "tick the named checkboxes, then Submit"),
        TaskInfo("click-option", 4, "select the named radio option, then Submit"),
        TaskInfo("focus-text", 3, "focus the text box"),
        TaskInfo("focus-text-2", 3, "focus the n-th text box"),
        TaskInfo("enter-text", 5, "type the given text into the field, then Submit"),
        TaskInfo("enter-password", 7, "type the password into both fields, then Submit"),
        TaskInfo("login-user", 7, "type username and password, then Login"),
    ]
}


_STATE_JS = """() => ({
  done: WOB_DONE_GLOBAL, reward: WOB_REWARD_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL,
  reason: WOB_REWARD_REASON === null ? null : String(WOB_REWARD_REASON),
  ready: WOB_TASK_READY,
  instruction: (typeof core !== 'undefined' && document.getElementById('query')) ? core.getUtterance() : ''
})"""

# One round trip a step: the page state and the elements together.
_OBSERVE_JS = "(args) => ({state: (" + _STATE_JS + ")(), elements: (" + ELEMENTS_JS + ")(args)})"

_SCROLL_PX = 100


class MiniWoBEnv(Env):
    """MiniWoB++ tasks in Chromium. See the module docstring for the coordinate contract.

    ``fresh_context=True`` (the default) gives every episode a fresh page load with the cookies and site data
    cleared, so nothing of one episode can leak into the next; it costs some 100-200 ms a reset.
    ``fresh_context=False`` restarts the next episode of the same task inside the loaded page,
    the way MiniWoB++'s own harness does (about 10 ms); a seed gives the same episode either way.
    """

    kind = "miniwob"

    def __init__(
        self,
        *,
        executable_path: str = CHROMIUM_PATH,
        fresh_context: bool = True,
        jpeg_quality: int = 80,
        episode_max_ms: int | None = None,
        wait_ms: int = 250,
        ready_timeout_s: float = 10.0,
        max_elements: int = 60,
        limits: Limits | None = None,
    ) -> None:
        self.executable_path = executable_path
        self.fresh_context = fresh_context
        self.jpeg_quality = jpeg_quality
        self.episode_max_ms = min(episode_max_ms or _NO_TIMEOUT_MS, _NO_TIMEOUT_MS)
        self.wait_ms = wait_ms
        self.ready_timeout_s = ready_timeout_s
        self.max_elements = max_elements
        self.limits = limits or Limits.from_env()
        self.base_url = ""  # where the task pages are served, once the browser's sandbox is made
        self.sandbox: Sandbox | None = None
        self._sandbox_dir: Path | None = None
        self._uid: Any = None  # a uid lease, under root
        self._launcher: Path | None = None  # the script Playwright starts: Chromium in the sandbox
        self._browser_env: dict[str, str] = {}
        self._pages: PageServer | None = None
        self._unconfined = False  # no sandbox can be made here: the browser runs as the worker's user
        self._playwright: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._cdp: Any = None
        self._page_task: str | None = None  # the task whose page is loaded
        self.width, self.height = WIDTH, HEIGHT
        self._screencast: Any = None  # the CDP session streaming the live view, while one does
        self._screencast_handler: Any = None
        self._live: LiveFrame | None = None
        self._task: str | None = None
        self._instruction = ""
        self._done = True

    # -- lifecycle -------------------------------------------------------------------------
    serves_task_pages = True  # MiniWoB++'s pages, in the sandbox (the webapp env serves its own sites)

    def _ensure_browser(self) -> None:
        if self._browser is not None and self._browser.is_connected():
            return
        self._drop_browser()
        self._ensure_sandbox()
        if self._playwright is None:
            self._playwright = Driver.acquire()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=str(self._launcher or self.executable_path), args=CHROMIUM_ARGS, headless=True,
                env=self._browser_env or None)
        except Exception as exc:
            raise EnvError(f"could not start Chromium at {self.executable_path}: {exc}") from exc

    def _ensure_sandbox(self) -> None:
        """The browser's sandbox, its home and launcher, and the task pages served inside it (made once an env)."""
        if self._confined_ready():
            return
        self._close_sandbox()
        found = support()
        if not found.namespaces:
            say_unconfined(found.reason)
            self._unconfined = True
            if self.serves_task_pages:
                self.base_url = serve_miniwob()
            return
        self._sandbox_dir = Path(tempfile.mkdtemp(prefix="loupe-browser-"))  # 0700: Loupe's user only
        home = self._sandbox_dir / "home"
        home.mkdir(mode=0o700)
        if found.per_uid:
            self._uid = allocate_uid()
            os.chown(home, self._uid.uid, self._uid.uid)
        sandbox = Sandbox(f"loupe-browser-{os.getpid()}-{self._sandbox_dir.name[-8:]}", binds=[home],
                          uid=self._uid.uid if self._uid else None, limits=self.limits, broker=True)
        sandbox.start()
        self.sandbox = sandbox
        if self.serves_task_pages:
            self._pages = PageServer(sandbox.listen())
            self.base_url = self._pages.url
        # Playwright starts this script with the browser's arguments and its CDP pipe (fds 3, 4), which pass
        # through nsenter and setpriv. Playwright's profile folder is its own user's; the browser uses one in its home.
        command = " ".join(shlex.quote(part) for part in sandbox.command([self.executable_path], cwd=home))
        script = f"""#!/bin/sh
for arg in "$@"; do
  shift
  case "$arg" in --user-data-dir=*) arg="--user-data-dir={home}/profile" ;; esac
  set -- "$@" "$arg"
done
exec {command} "$@"
"""
        self._launcher = self._sandbox_dir / "chromium"
        self._launcher.write_text(script)
        self._launcher.chmod(0o700)
        self._browser_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
                             "TMPDIR": "/tmp", "XDG_CONFIG_HOME": str(home / ".config"),
                             "XDG_CACHE_HOME": str(home / ".cache")}

    def _confined_ready(self) -> bool:
        """Whether the browser's sandbox (or, where none can be made, the unconfined set-up) is made and alive."""
        return self._unconfined or (self.sandbox is not None and self.sandbox.alive())

    def _close_sandbox(self) -> None:
        self._unconfined = False
        if self._pages is not None:
            self._pages.stop()
            self._pages = None
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self._uid is not None:
            self._uid.release()
            self._uid = None
        if self._sandbox_dir is not None:
            shutil.rmtree(self._sandbox_dir, ignore_errors=True)
            self._sandbox_dir = None
        self._launcher, self._browser_env = None, {}

    def _drop_browser(self) -> None:
        self._close_context()
        if self._browser is not None:
            try:
                self._browser.close()
            except Exception:  # noqa: BLE001 - a crashed browser cannot be closed cleanly
                pass
        self._browser = None

    def _close_context(self) -> None:
        if self._context is not None:
            try:
                self._context.close()
            except Exception:  # noqa: BLE001 - same: the context may have died with the browser
                pass
        self._context = self._page = self._cdp = self._page_task = None

    def close(self) -> None:
        self._drop_browser()
        if self._playwright is not None:
            self._playwright = None
            Driver.release()
        self._close_sandbox()
        self._done = True

    @property
    def browser_pid(self) -> int | None:
        """The Chromium browser process id, from CDP (operators and tests use it to find the process)."""
        if self._browser is None or not self._browser.is_connected():
            return None
        session = self._browser.new_browser_cdp_session()
        try:
            processes = session.send("SystemInfo.getProcessInfo")["processInfo"]
        finally:
            session.detach()
        pid = next((int(p["id"]) for p in processes if p.get("type") == "browser"), None)
        if pid is not None and self.sandbox is not None:  # the browser names its pid in its sandbox's pid namespace
            return self.sandbox.host_pid(pid)
        return pid

    # -- episodes --------------------------------------------------------------------------
    def reset(self, task: str, seed: int) -> Observation:
        if task not in TASKS and not (miniwob_html_dir() / "miniwob" / f"{task}.html").is_file():
            raise EnvError(f"unknown MiniWoB++ task {task!r}; registered: {', '.join(TASKS)}")
        self._done = True
        for attempt in (1, 2):  # a browser that died since the last episode is replaced once
            self._ensure_browser()
            try:
                return self._start_episode(task, seed)
            except EnvError:
                raise
            except Exception as exc:
                self._drop_browser()
                if attempt == 2:
                    raise EnvError(f"could not start {task} (seed {seed}): {exc}") from exc
        raise AssertionError("unreachable")

    def _load(self, task: str) -> None:
        """Load ``task``'s page afresh: in the context the last episode used when it is there (its other tabs
        closed, its cookies and the task pages' site data cleared first: local and session storage, IndexedDB,
        caches, service workers), else in a new context. Either way nothing of one episode reaches the next; a new
        context a reset started a renderer process: 1.4 s of Chromium's CPU and 1.0 s a reset on a loaded 2-core
        machine, against 0.18 s and 0.17 s for the reload."""
        if self._page is not None and not self._page.is_closed():
            try:
                for page in self._context.pages:
                    if page is not self._page:
                        page.close()
                self._context.clear_cookies()
                origin = "{0.scheme}://{0.netloc}".format(urlsplit(self.base_url))
                self._cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
                self._open(task)
                return
            except Exception as exc:  # noqa: BLE001 - a page that cannot be reloaded is replaced with its context
                log.info("reloading the task page failed (%s); starting a new browser context", exc)
        self._close_context()
        self._context = self._browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1)
        self._page = self._context.new_page()
        self._page.set_default_timeout(self.ready_timeout_s * 1000)
        self._cdp = self._context.new_cdp_session(self._page)
        self._open(task)

    def _open(self, task: str) -> None:
        self._page_task = None
        url = f"{self.base_url}miniwob/{task}.html"
        response = self._page.goto(url, wait_until="load")
        if response is None or not response.ok:
            raise EnvError(f"task page {url} did not load (status {response.status if response else 'none'})")
        # The harness panels right of the task area would make the page scroll sideways.
        self._page.add_style_tag(content=_HIDE_HARNESS_CSS)
        self._page_task = task

    def _start_episode(self, task: str, seed: int) -> Observation:
        if self.fresh_context or self._page is None or self._page_task != task or self._page.is_closed():
            self._load(task)
        else:
            self._page.mouse.move(WIDTH + 100, 0)  # no hover left over from the last episode
        self._page.evaluate(
            """([seed, maxMs]) => {
                if (document.activeElement) document.activeElement.blur();
                core.EPISODE_MAX_TIME = maxMs;
                Math.seedrandom(seed);
                core.startEpisodeReal();
            }""",
            [str(seed), self.episode_max_ms],
        )
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            state, observation = self._observe()
            if state["ready"]:
                break
            if time.monotonic() > deadline:
                self._close_context()  # the next reset loads the page again, even when contexts are reused
                raise EnvError(f"{task} (seed {seed}) never became ready in {self.ready_timeout_s} s")
            time.sleep(0.05)
        self._task = task
        self._instruction = observation.instruction
        self._done = False
        return observation

    def _screenshot(self) -> bytes:
        # The viewport is the task area, so no clip: a clipped capture costs about twice as much.
        reply = self._cdp.send(
            "Page.captureScreenshot", {"format": "jpeg", "quality": self.jpeg_quality, "optimizeForSpeed": True}
        )
        return base64.b64decode(reply["data"])

    # -- live view -------------------------------------------------------------------------
    def live_frame(self) -> LiveFrame | None:
        """The newest frame of a CDP screencast of the page (Chromium sends one when the page repaints, and the
        next only once that one is acknowledged). Playwright's sync API hands over CDP events only while one of
        its calls runs, on the thread that owns the page: so this waits LIVE_PUMP_MS for them."""
        page, cdp = self._page, self._cdp
        if page is None or cdp is None or page.is_closed():
            return None
        if self._screencast is not cdp:  # a new episode's page, a new tab: stream that one
            self.live_stop()
            self._screencast_start(cdp)
        page.wait_for_timeout(LIVE_PUMP_MS)
        return self._live

    def _screencast_start(self, cdp: Any) -> None:
        def on_frame(params: dict[str, Any]) -> None:
            if self._screencast is not cdp:
                return
            self._live = LiveFrame(jpeg=base64.b64decode(params["data"]), width=self.width, height=self.height)
            try:
                cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]})
            except Exception:  # noqa: BLE001 - the page is going away; the next live_frame finds out
                pass

        cdp.on("Page.screencastFrame", on_frame)
        self._screencast, self._screencast_handler, self._live = cdp, on_frame, None
        cdp.send("Page.startScreencast", {"format": "jpeg", "quality": LIVE_JPEG_QUALITY, "maxWidth": self.width,
                                          "maxHeight": self.height, "everyNthFrame": 1})

    def live_stop(self) -> None:
        cdp, handler = self._screencast, self._screencast_handler
        self._screencast = self._screencast_handler = self._live = None
        if cdp is None:
            return
        try:
            cdp.remove_listener("Page.screencastFrame", handler)
            cdp.send("Page.stopScreencast")
        except Exception:  # noqa: BLE001 - its page or browser closed already: nothing streams
            pass

    def _observe(self) -> tuple[dict[str, Any], Observation]:
        """Read the page state and elements (one round trip), then take the screenshot."""
        page = self._page
        raw = page.evaluate(_OBSERVE_JS, [WIDTH, HEIGHT, self.max_elements])
        state = raw["state"]
        elements = [
            Element(
                role=e["role"], text=e["text"], x=e["x"], y=e["y"], width=e["width"], height=e["height"],
                checked=e.get("checked"), focused=bool(e.get("focused")),
            )
            for e in raw["elements"]
        ]
        # After an episode ends the page shows its sync screen; the instruction stays the episode's.
        instruction = self._instruction if state["done"] else state["instruction"]
        observation = Observation(instruction=instruction, url=page.url, screenshot=self._screenshot(),
                                  width=WIDTH, height=HEIGHT, elements=elements)
        return state, observation

    def step(self, action: Action) -> StepResult:
        if self._page is None or self._task is None:
            raise EnvError("step() before reset(): start an episode first")
        if self._done:
            raise EnvError("step() after the episode ended; call reset() to start a new one")
        try:
            info: dict[str, Any] = {}
            error = self._off_screen(action)
            if error:
                info["error"] = error
            else:
                info.update(self._perform(action))
            state, observation = self._observe()
        except EnvError:
            raise
        except Exception as exc:
            self._done = True
            self._drop_browser()
            raise EnvError(
                f"the browser failed during {action.to_text()} in {self._task}: {exc}. "
                "The episode is lost; the next reset() starts a new browser."
            ) from exc
        done = bool(state["done"]) or action.name == "finished"
        reward = float(state["reward"]) if state["done"] else 0.0
        if state["done"]:
            info.update(raw_reward=float(state["raw_reward"]), reason=state["reason"])
        self._done = done
        return StepResult(observation=observation, reward=reward, done=done, info=info)

    def evaluate(self, *, answer: str | None = None) -> float:
        """The page's own reward if its task has ended, else 0.0: a MiniWoB++ page checks the task only when the
        agent's last action completes it (then the step itself ends the episode), so a person who finishes
        earlier finishes an unsolved page."""
        if self._page is None or self._task is None:
            raise EnvError("evaluate() before reset(): start an episode first")
        try:
            state = self._page.evaluate(_STATE_JS)
        except Exception as exc:
            raise EnvError(f"the page could not be checked: {exc}") from exc
        return float(state["reward"]) if state["done"] else 0.0

    # -- actions ---------------------------------------------------------------------------
    @staticmethod
    def _off_screen(action: Action) -> str | None:
        a = action.args
        points = [(a["x1"], a["y1"]), (a["x2"], a["y2"])] if action.name == "drag" else (
            [(a["x"], a["y"])] if "x" in a else []
        )
        for x, y in points:
            if not (0 <= x < WIDTH and 0 <= y < HEIGHT):
                return f"{action.name} at ({x}, {y}) is outside the {WIDTH}x{HEIGHT} screenshot"
        return None

    def _perform(self, action: Action) -> dict[str, Any]:
        page, a = self._page, action.args
        mouse = page.mouse
        if action.name == "click":
            mouse.click(a["x"], a["y"])
        elif action.name == "double_click":
            mouse.dblclick(a["x"], a["y"])
        elif action.name == "right_click":
            mouse.click(a["x"], a["y"], button="right")
        elif action.name == "drag":
            mouse.move(a["x1"], a["y1"])
            mouse.down()
            mouse.move(a["x2"], a["y2"], steps=8)
            mouse.up()
        elif action.name == "type":
            page.keyboard.type(a["text"])
        elif action.name == "hotkey":
            try:
                key = playwright_key(a["keys"])
            except ValueError as exc:
                return {"error": str(exc)}
            page.keyboard.press(key)
        elif action.name == "scroll":
            dx = {"left": -_SCROLL_PX, "right": _SCROLL_PX}.get(a["direction"], 0)
            dy = {"up": -_SCROLL_PX, "down": _SCROLL_PX}.get(a["direction"], 0)
            mouse.move(a["x"], a["y"])
            mouse.wheel(dx, dy)
            page.wait_for_timeout(50)  # wheel scrolling is applied asynchronously
        elif action.name == "wait":
            page.wait_for_timeout(self.wait_ms)
        elif action.name == "finished":
            return {"answer": a["answer"]}
        elif action.name == "call_user":
            return {"call_user": a["question"]}
        elif action.name == "shell":
            return {"error": "a web page has no shell: shell(command=...) does nothing here"}
        return {}
