"""A terminal sandbox for hybrid tasks, behind the same Env interface as the browser.

- Keys, not a pointer: ``type(text=...)`` adds to the command line; ``hotkey(keys="enter")`` runs
  it. A ``"\\n"`` inside typed text also runs the line typed so far (as a real terminal would).
  ``ctrl+u`` / ``ctrl+c`` clear the line, ``backspace`` deletes a character, ``ctrl+l`` clears the
  screen. Pointer actions are not errors to raise: they come back as ``info["error"]``.
- Each command runs as ``bash -c`` in the episode's fresh home folder, with a time limit, its output
  truncated, in a minimal environment (no proxy variables, HOME is the folder). Files persist between
  commands; shell state (``cd``, variables) does not.
- Confined (sandbox.py): every episode gets a sandbox of its own, a network namespace with only a loopback,
  Loupe's files hidden, private /tmp, its own uid when Loupe runs as root, and CPU, memory and process limits
  (``limits``, default ``LOUPE_SANDBOX_*``). A command that hits a limit says so in ``info["error"]``. Where no
  sandbox can be made, ``reset`` raises EnvError with the reason: commands never run unconfined.
- The observation is the rendered screen: ``screen_text`` (the prompt text) and the same screen as
  a JPEG drawn with Pillow, so the interface matches the browser's. ``elements`` is empty.
- A task is verified by a check on the resulting files after every command; success ends the
  episode with reward 1.0. ``finished()`` ends it too (reward 1.0 only if the check passes).
"""

from __future__ import annotations

import io
import os
import random
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.actions import Action
from agent.envs.base import Env, EnvError, Observation, StepResult, TaskInfo
from agent.envs.sandbox import Limits, Sandbox, allocate_uid, kill_group, support

__all__ = ["TASKS", "TERMINAL_TASKS", "TerminalEnv"]

PROMPT = "$ "
_WORDS = ["apple", "river", "stone", "cloud", "maple", "tiger", "lemon", "ocean", "piano", "comet"]
_NAMES = ["notes", "hello", "todo", "report", "draft", "memo"]


@dataclass(frozen=True)
class TerminalTask:
    """``setup`` prepares the directory and returns the instruction and the facts ``check`` needs
    (kept in the env, not in the directory, so the agent cannot read the answer)."""

    info: TaskInfo
    setup: Callable[[Path, random.Random], tuple[str, dict]]
    check: Callable[[Path, dict], bool]


def _hello_setup(root: Path, rng: random.Random) -> tuple[str, dict]:
    name, word = f"{rng.choice(_NAMES)}.txt", rng.choice(_WORDS)
    return f'Create a file named {name} that contains the word "{word}".', {"name": name, "word": word}


def _hello_check(root: Path, facts: dict) -> bool:
    target = root / facts["name"]
    return target.is_file() and target.read_text(errors="replace").strip() == facts["word"]


def _mkdir_setup(root: Path, rng: random.Random) -> tuple[str, dict]:
    folder, file = rng.choice(["data", "out", "build", "logs"]), rng.choice(["ready", "done", "ok"])
    return f"Make a directory named {folder} holding an empty file named {file}.", {"path": f"{folder}/{file}"}


def _mkdir_check(root: Path, facts: dict) -> bool:
    target = root / facts["path"]
    return target.is_file() and target.stat().st_size == 0


def _count_setup(root: Path, rng: random.Random) -> tuple[str, dict]:
    lines = [rng.choice(_WORDS) for _ in range(rng.randint(3, 12))]
    (root / "words.txt").write_text("\n".join(lines) + "\n")
    return "Write the number of lines in words.txt into count.txt.", {"count": len(lines)}


def _count_check(root: Path, facts: dict) -> bool:
    target = root / "count.txt"
    return target.is_file() and target.read_text(errors="replace").strip() == str(facts["count"])


TERMINAL_TASKS: dict[str, TerminalTask] = {
    task.info.name: task
    for task in [
        TerminalTask(TaskInfo("terminal-hello", 4, "write a word into a named file"), _hello_setup, _hello_check),
        TerminalTask(TaskInfo("terminal-mkdir", 4, "make a directory with an empty file"), _mkdir_setup, _mkdir_check),
        TerminalTask(TaskInfo("terminal-count", 4, "count the lines of a file into another"), _count_setup,
                     _count_check),
    ]
}
TASKS: dict[str, TaskInfo] = {name: task.info for name, task in TERMINAL_TASKS.items()}


class TerminalEnv(Env):
    kind = "terminal"

    def __init__(self, *, command_timeout_s: float = 5.0, max_output_chars: int = 2000, rows: int = 24,
                 cols: int = 80, jpeg_quality: int = 80, limits: Limits | None = None) -> None:
        self.command_timeout_s = command_timeout_s
        self.max_output_chars = max_output_chars
        self.rows, self.cols = rows, cols
        self.jpeg_quality = jpeg_quality
        self.limits = limits or Limits.from_env()
        self._base: Path | None = None  # the env's folder (root's only): the episodes' homes in it
        self._root: Path | None = None
        self._sandbox: Sandbox | None = None
        self._uid: Any = None  # a uid lease, under root
        self._task: TerminalTask | None = None
        self._instruction = ""
        self._facts: dict = {}
        self._lines: list[str] = []
        self._input = ""
        self._done = True

    @property
    def workdir(self) -> Path | None:
        """The episode's directory (tests and checks read it)."""
        return self._root

    @property
    def sandbox(self) -> Sandbox | None:
        return self._sandbox

    def reset(self, task: str, seed: int) -> Observation:
        if task not in TERMINAL_TASKS:
            raise EnvError(f"unknown terminal task {task!r}; registered: {', '.join(TERMINAL_TASKS)}")
        self._cleanup()
        if self._base is None:
            self._base = Path(tempfile.mkdtemp(prefix="loupe-terminal-"))
        if self._uid is None and support().per_uid:
            self._uid = allocate_uid()
        self._root = self._base / f"home-{uuid.uuid4().hex[:8]}"
        self._root.mkdir(mode=0o700)
        uid = self._uid.uid if self._uid else None
        if uid is not None:
            os.chown(self._root, uid, uid)
        sandbox = Sandbox(f"loupe-terminal-{os.getpid()}-{self._root.name}", binds=[self._root], uid=uid,
                          limits=self.limits)
        sandbox.start()  # SandboxUnavailable (an EnvError) says why no sandbox can be made here
        self._sandbox = sandbox
        self._task = TERMINAL_TASKS[task]
        self._instruction, self._facts = self._task.setup(self._root, random.Random(seed))  # into its home
        if uid is not None:
            for path in self._root.rglob("*"):
                os.chown(path, uid, uid, follow_symlinks=False)
        self._lines, self._input, self._done = [], "", False
        return self._observe()

    def close(self) -> None:
        self._cleanup()
        if self._base is not None:
            shutil.rmtree(self._base, ignore_errors=True)
            self._base = None
        if self._uid is not None:
            self._uid.release()
            self._uid = None
        self._done = True

    def _cleanup(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    # -- steps -----------------------------------------------------------------------------
    def step(self, action: Action) -> StepResult:
        if self._task is None or self._root is None:
            raise EnvError("step() before reset(): start an episode first")
        if self._done:
            raise EnvError("step() after the episode ended; call reset() to start a new one")
        info: dict[str, Any] = {}
        ran = False
        if action.name == "type":
            *complete, rest = action.args["text"].split("\n")
            for line in complete:
                self._run(self._input + line, info)
                self._input, ran = "", True
            self._input += rest
        elif action.name == "hotkey":
            keys = action.args["keys"].lower().replace(" ", "")
            if keys in ("enter", "return"):
                self._run(self._input, info)
                self._input, ran = "", True
            elif keys in ("ctrl+u", "ctrl+c"):
                if keys == "ctrl+c":
                    self._lines.append(PROMPT + self._input + "^C")
                self._input = ""
            elif keys == "backspace":
                self._input = self._input[:-1]
            elif keys == "ctrl+l":
                self._lines = []
            else:
                info["error"] = f"the terminal does not support the key {action.args['keys']!r}"
        elif action.name == "shell":  # the command line typed and run in one action
            self._run(action.args["command"], info)
            self._input, ran = "", True
        elif action.name == "call_user":
            info["call_user"] = action.args["question"]
        elif action.name == "finished":
            info["answer"] = action.args["answer"]
        elif action.name != "wait":
            info["error"] = f"the terminal has no pointer: {action.name} does nothing; use type and hotkey"
        solved = self._task.check(self._root, self._facts) if (ran or action.name == "finished") else False
        done = solved or action.name == "finished"
        self._done = done
        return StepResult(observation=self._observe(), reward=1.0 if solved else 0.0, done=done, info=info)

    def evaluate(self, *, answer: str | None = None) -> float:
        """The task's check on the directory as it is now (1.0 solved, else 0.0)."""
        if self._task is None or self._root is None:
            raise EnvError("evaluate() before reset(): start an episode first")
        return 1.0 if self._task.check(self._root, self._facts) else 0.0

    def _run(self, command: str, info: dict[str, Any]) -> None:
        assert self._root is not None and self._sandbox is not None
        self._lines.append(PROMPT + command)
        if not command.strip():
            return
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self._root), "LANG": "C.UTF-8",
               "TERM": "dumb", "PWD": str(self._root), "TMPDIR": "/tmp"}
        argv = self._sandbox.command([*self._sandbox.rlimit_memory(), "bash", "--noprofile", "--norc", "-c", command],
                                     cwd=self._root)
        try:
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise EnvError(f"could not start bash for the terminal: {exc}") from exc
        try:
            out, _ = proc.communicate(timeout=self.command_timeout_s)
            info["exit_code"] = proc.returncode
        except subprocess.TimeoutExpired:
            kill_group(proc)  # the whole group: pipelines, children, a fork bomb's copies
            out, _ = proc.communicate()
            info["exit_code"] = None
            info["error"] = f"the command ran over {self.command_timeout_s} s and was stopped"
            out += f"\n[stopped after {self.command_timeout_s} s]".encode()
        breach = self._sandbox.breach()
        if breach:
            info["error"] = f"{info['error']}; {breach}" if info.get("error") else f"the command failed: {breach}"
            out += f"\n[{breach}]".encode()
        text = out.decode("utf-8", "replace")
        if len(text) > self.max_output_chars:
            text = text[: self.max_output_chars] + "\n[output truncated]"
        self._lines.extend(text.rstrip("\n").split("\n") if text.strip() else [])

    # -- the screen ------------------------------------------------------------------------
    def screen_lines(self) -> list[str]:
        lines = [line[: self.cols] for line in self._lines[-(self.rows - 1):]]
        return [*lines, (PROMPT + self._input)[: self.cols]]

    def _observe(self) -> Observation:
        lines = self.screen_lines()
        return Observation(
            instruction=self._instruction, url=f"terminal://{self._task.info.name if self._task else ''}",
            screenshot=self._render(lines), width=self._size[0], height=self._size[1], elements=[],
            screen_text="Screen:\n" + "\n".join(lines),
        )

    @property
    def _size(self) -> tuple[int, int]:
        return self.cols * 6 + 8, self.rows * 12 + 8

    def _render(self, lines: list[str]) -> bytes:
        from PIL import Image, ImageDraw, ImageFont

        image = Image.new("RGB", self._size, (16, 16, 16))
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default()
        for row, line in enumerate(lines):
            draw.text((4, 4 + row * 12), line, fill=(220, 220, 220), font=font)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=self.jpeg_quality)
        return buffer.getvalue()
