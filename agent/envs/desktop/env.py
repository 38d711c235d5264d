"""The ``desktop`` env kind: a Linux desktop (Xvfb + openbox + apps) acting on OSWorld-format tasks.

- ``reset(task, seed)``: ``task`` is an OSWorld task id; the seed is unused (OSWorld tasks are
  fixed). The display is kept; the session (processes, HOME) is new every episode, then the
  task's ``config`` steps run (an app that never opens a window, a setup command that fails:
  EnvError naming the step).
- Actions go through XTEST in process; coordinates are screenshot pixels (the screen is the
  screenshot). An action outside the screen does nothing and says why in ``info["error"]`` (as in
  MiniWoB: a model's bad coordinate is a wasted step the model and the person see, not a lost episode);
  a desktop process that died (the X server, the window manager, the session bus) raises EnvError and
  the next reset starts a new desktop.
- ``pool=N`` keeps N desktops warm (pool.py): a reset takes a ready one (a fresh session, so under root
  a different uid and a new HOME) and hands the previous one back to be recycled in the background.
- The observation is a JPEG of the whole screen and the elements of a capped AT-SPI walk (what is
  showing and has a name or text); xterm exposes nothing to AT-SPI, so a terminal is pixels only.
- A hybrid task (``"hybrid": true`` in its JSON) also takes ``shell(command=...)``: the command runs in the
  session (the desktop's uid, HOME, display and bus; files stay, shell state does not), with a time limit,
  and the observation's ``screen_text`` holds the last commands and their output. Other tasks answer a
  shell action with ``info["error"]``.
- ``finished(answer=...)`` ends the episode and scores it with the task's evaluator (0..1; a person-judged task,
  an empty evaluator: reward 0 with ``info["verdict"] = "person"``, and ``evaluate()`` None); ``evaluate()`` scores
  the current state without ending it (a person's Finish, the end of an episode out of steps, tests).
- ``add_task(definition, files=...)``: an OSWorld task's JSON and local copies of the files it downloads (the
  project's file store); a reset of a task missing one is refused before anything starts, naming them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from agent.actions import Action
from agent.envs.base import Element, Env, EnvError, LiveFrame, Observation, StepResult, TaskInfo
from agent.envs.desktop import osworld
from agent.envs.desktop.pool import DesktopPool
from agent.envs.desktop.session import Desktop
from agent.envs.desktop.xinput import XInput
from agent.envs.sandbox import Limits

__all__ = ["DESKTOP_TASKS", "TASKS", "TASKS_DIR", "DesktopEnv"]

TASKS_DIR = Path(__file__).with_name("tasks")
DESKTOP_TASKS: dict[str, osworld.OSWorldTask] = osworld.load_tasks_dir(TASKS_DIR)
MAX_STEPS = 15
TASKS: dict[str, TaskInfo] = {
    task_id: TaskInfo(task_id, MAX_STEPS, task.instruction[:80]) for task_id, task in DESKTOP_TASKS.items()
}
MAX_ELEMENTS = 200
SHELL_HINT = ('Shell: shell(command="...") runs a command as you, in your home folder (files stay, cd does not); '
              "its output shows here.")
SHELL_LINES = 20
LIVE_JPEG_QUALITY = 60  # the live view's frames (people watching; the model's screenshots keep theirs)


class DesktopEnv(Env):
    kind = "desktop"

    def __init__(self, *, width: int = 1280, height: int = 720, jpeg_quality: int = 80, elements: bool = True,
                 settle_s: float = 0.25, wait_s: float = 1.0, per_uid: bool | None = None,
                 tasks: dict[str, osworld.OSWorldTask] | None = None, pool: int = 0,
                 shell_timeout_s: float = 10.0, shell_output_chars: int = 2000, limits: Limits | None = None) -> None:
        self.width, self.height = width, height
        self.jpeg_quality = jpeg_quality
        self.read_elements = elements
        self.settle_s, self.wait_s = settle_s, wait_s
        self.per_uid = per_uid
        self.limits = limits or Limits.from_env()  # each session's sandbox (sandbox.py)
        self.tasks = {**DESKTOP_TASKS, **(tasks or {})}
        self.files: dict[str, dict] = {}  # task id -> its files' local copies ({(url, path): file}, osworld.find_file)
        self.desktop: Desktop | None = None
        self._input: Any = None
        self._task: osworld.OSWorldTask | None = None
        self._done = True
        self.shell_timeout_s, self.shell_output_chars = shell_timeout_s, shell_output_chars
        self._shell_lines: list[str] = []  # a hybrid task's shell: the commands run and their output
        self._live_rgb: bytes | None = None  # the live view's last grab, and its frame
        self._live: LiveFrame | None = None
        # pool > 0: that many desktops are kept warm (pool.py), so a reset does not wait for a display or a session
        self.pool = DesktopPool(pool, width=width, height=height, per_uid=per_uid, limits=self.limits) if pool else None

    @property
    def home(self) -> Path | None:
        """The episode's HOME (the VM's /home/user)."""
        return self.desktop.home if self.desktop else None

    # -- episodes --------------------------------------------------------------------------
    def add_task(self, definition: dict, *, files: dict | None = None) -> str:
        """Register a task given as its OSWorld JSON, for reset() by its id, which is returned. TaskFormatError
        when the loader refuses it (naming the unsupported step, getter or metric), or when it takes a shipped
        task's id with other JSON. ``files``: local copies of the files it downloads, ``{(url, path): file}`` (the
        project's file store; osworld.find_file)."""
        task = osworld.load_task(definition, origin="authored")
        shipped = DESKTOP_TASKS.get(task.id)
        if shipped is not None and shipped.raw != definition:
            raise osworld.TaskFormatError(f"OSWorld task {task.id}: the id of a shipped task; give yours another id")
        self.tasks[task.id] = task
        self.files[task.id] = dict(files or {})
        return task.id

    def reset(self, task: str, seed: int) -> Observation:
        if task not in self.tasks:
            raise EnvError(f"unknown desktop task {task!r}; registered: {', '.join(self.tasks)}")
        self._task, self._done = self.tasks[task], True
        self._shell_lines = []
        missing = osworld.missing_files(self._task, self.files.get(task))
        if missing:  # refused before anything starts (flywheel refuses such an episode at start, naming them too)
            raise EnvError(f"could not set up {task}: {len(missing)} of its files are not in the project's file "
                           f"store: {', '.join(item.name for item in missing)}; upload them on the Tasks page")
        previous = None
        if self.pool is not None:
            previous = self._take_from_pool()
        else:
            self._ensure_desktop()
        assert self.desktop is not None
        try:
            if self.pool is None:
                self.desktop.new_session()
            osworld.run_setup(self._task.config, self.desktop, files=self.files.get(task))
        except EnvError as exc:
            # the step's own failure first, then what it took down with it: a fork bomb that fills the sandbox's
            # process limit can abort the window manager too (it could not start a thread), and a person needs
            # the cause, not only that openbox died
            try:
                self._fail_if_dead()
            except EnvError as dead:
                raise EnvError(f"could not set up {task}: {exc}; and then {dead}") from exc
            raise EnvError(f"could not set up {task}: {exc}") from exc
        finally:
            if self.pool is not None:
                self.pool.give_back(previous)
        if self._task.config:  # let the apps it opened draw
            time.sleep(self.settle_s)
        self._done = False
        return self._observe()

    def _ensure_desktop(self) -> None:
        if self.desktop is not None:
            try:
                self.desktop.check_alive_display()
                return
            except EnvError:
                self._drop_desktop()
        desktop = Desktop(width=self.width, height=self.height, per_uid=self.per_uid, limits=self.limits)
        try:
            desktop.start()
        except BaseException:
            desktop.close()
            raise
        self.desktop, self._input = desktop, XInput(desktop.display)

    def _take_from_pool(self) -> Desktop | None:
        """Move to the next warm desktop; returns the one the last episode used, for the pool to reset once
        this episode's setup is done."""
        assert self.pool is not None
        previous, self.desktop, self._input = self.desktop, None, None
        try:
            desktop = self.pool.take()
        except EnvError:
            self.pool.give_back(previous)
            raise
        self.desktop, self._input = desktop, XInput(desktop.display)
        return previous

    def _drop_desktop(self) -> None:
        if self.desktop is not None:
            try:
                if self.pool is not None:
                    self.pool.close_desktop(self.desktop)
                else:
                    self.desktop.close()
            finally:
                self.desktop, self._input = None, None

    def _fail_if_dead(self, wait_s: float = 0.0) -> None:
        """If a desktop process died, end the episode, drop the desktop and raise EnvError saying which.
        ``wait_s``: after a call failed, how long to give a dying process to be seen dead (the X connection
        can break a moment before the server's exit is visible)."""
        if self.desktop is None:
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.desktop.check_alive()
            except EnvError as exc:
                self._done = True
                self._drop_desktop()
                raise EnvError(f"{exc}; the episode is lost, the next reset() starts a new desktop") from None
            if time.monotonic() >= deadline:
                return
            time.sleep(0.05)

    def close(self) -> None:
        self._done = True
        try:
            if self.pool is not None:
                self.pool.close()
        finally:
            self._drop_desktop()

    # -- steps -----------------------------------------------------------------------------
    def step(self, action: Action) -> StepResult:
        if self._task is None or self.desktop is None:
            raise EnvError("step() before reset(): start an episode first")
        if self._done:
            raise EnvError("step() after the episode ended; call reset() to start a new one")
        self._fail_if_dead()
        off = self._off_screen(action)
        if off:
            return StepResult(observation=self._observe(), reward=0.0, done=False, info={"error": off})
        info: dict[str, Any] = {}
        reward, done = 0.0, False
        try:
            info.update(self._perform(action))
            if action.name == "finished":
                score, done = self.evaluate(answer=action.args["answer"]), True
                if score is None:  # an empty evaluator: a person judges it, no automatic reward
                    info["verdict"] = "person"
                reward = score or 0.0
            elif action.name not in ("wait", "call_user"):
                time.sleep(self.settle_s)
            observation = self._observe()
        except EnvError:
            self._fail_if_dead(wait_s=1.0)
            raise
        except Exception as exc:  # the X connection broke, a process vanished mid-call
            self._fail_if_dead(wait_s=1.0)
            raise EnvError(f"the desktop failed during {action.to_text()}: {exc}") from exc
        self._done = done
        return StepResult(observation=observation, reward=reward, done=done, info=info)

    def evaluate(self, *, answer: str | None = None) -> float | None:
        """The task's score for the desktop as it is now (0..1), as if the agent finished with ``answer``; None for a
        person-judged task (an empty evaluator)."""
        if self._task is None or self.desktop is None:
            raise EnvError("evaluate() before reset(): start an episode first")
        return osworld.evaluate_task(self._task, self.desktop, answer=answer, files=self.files.get(self._task.id))

    def _off_screen(self, action: Action) -> str | None:
        a = action.args
        points = [(a["x1"], a["y1"]), (a["x2"], a["y2"])] if action.name == "drag" else (
            [(a["x"], a["y"])] if "x" in a else [])
        for x, y in points:
            if not (0 <= x < self.width and 0 <= y < self.height):
                return f"{action.name} at ({x}, {y}) is outside the {self.width}x{self.height} screen"
        return None

    def _perform(self, action: Action) -> dict[str, Any]:
        a, xin = action.args, self._input
        if action.name == "click":
            xin.click(a["x"], a["y"])
        elif action.name == "double_click":
            xin.click(a["x"], a["y"], count=2)
        elif action.name == "right_click":
            xin.click(a["x"], a["y"], button="right")
        elif action.name == "drag":
            xin.drag(a["x1"], a["y1"], a["x2"], a["y2"])
        elif action.name == "type":
            xin.type(a["text"])
        elif action.name == "hotkey":
            try:
                xin.hotkey(a["keys"])
            except ValueError as exc:
                return {"error": str(exc)}
        elif action.name == "scroll":
            xin.scroll(a["x"], a["y"], a["direction"])
        elif action.name == "wait":
            time.sleep(self.wait_s)
        elif action.name == "finished":
            return {"answer": a["answer"]}
        elif action.name == "call_user":
            return {"call_user": a["question"]}
        elif action.name == "shell":
            return self._shell(a["command"])
        return {}

    def _shell(self, command: str) -> dict[str, Any]:
        """Run a hybrid task's command in the session: the desktop's uid, HOME, display and bus."""
        assert self._task is not None and self.desktop is not None
        if not self._task.hybrid:
            return {"error": f"{self._task.id} has no shell: act on the screen (shell is for hybrid tasks)"}
        info: dict[str, Any] = {}
        try:
            result = self.desktop.run(command, shell=True, timeout_s=self.shell_timeout_s)
            output, info["exit_code"] = result.stdout + result.stderr, result.returncode
        except EnvError as exc:  # ran over its time
            output, info["exit_code"], info["error"] = "", None, str(exc)
        if len(output) > self.shell_output_chars:
            output = output[:self.shell_output_chars] + "\n[output truncated]"
        info["output"] = output  # stored with the step: the session page shows it under the shell action
        self._shell_lines += ["$ " + command, *(output.rstrip("\n").split("\n") if output.strip() else [])]
        if info.get("error"):
            self._shell_lines.append(f"[{info['error']}]")
        return info

    # -- observation -----------------------------------------------------------------------
    def _observe(self) -> Observation:
        assert self.desktop is not None and self._task is not None
        screenshot = self.desktop.screenshot(self.jpeg_quality)
        elements = self.elements() if self.read_elements else []
        shell = "\n".join([SHELL_HINT, *self._shell_lines[-SHELL_LINES:]]) if self._task.hybrid else ""
        return Observation(instruction=self._task.instruction, url=f"desktop://{self._task.id}",
                           screenshot=screenshot, width=self.width, height=self.height, elements=elements,
                           screen_text=shell)

    def live_frame(self) -> LiveFrame | None:
        """The screen now (an mss grab), encoded only when its pixels changed since the last call."""
        if self.desktop is None or self._task is None:
            return None
        rgb, size = self.desktop.grab()
        if self._live is None or rgb != self._live_rgb:
            self._live_rgb = rgb
            self._live = LiveFrame(jpeg=self.desktop.jpeg(rgb, size, LIVE_JPEG_QUALITY), width=self.width,
                                   height=self.height)
        return self._live

    def live_stop(self) -> None:
        self._live_rgb = self._live = None

    def elements(self) -> list[Element]:
        """What is showing on screen and has a name or text, from the capped AT-SPI walk."""
        assert self.desktop is not None
        found = []
        for node in self.desktop.accessibility_nodes()["nodes"]:
            text = (node["text"] if node["role"] in ("text", "entry", "paragraph", "terminal") else "") or node["name"]
            if not text.strip() or not node.get("showing") or node["role"] in ("application", "desktop frame"):
                continue
            x, y, w, h = node["x"], node["y"], node["width"], node["height"]
            if w <= 0 or h <= 0 or x + w <= 0 or y + h <= 0 or x >= self.width or y >= self.height:
                continue
            cx = min(max(x + w // 2, 0), self.width - 1)
            cy = min(max(y + h // 2, 0), self.height - 1)
            found.append(Element(role=node["role"], text=text, x=cx, y=cy, width=w, height=h,
                                 checked=node.get("checked"), focused=bool(node.get("focused"))))
            if len(found) >= MAX_ELEMENTS:
                break
        return found
