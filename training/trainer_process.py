"""The trainer as a program (``python -m trainer``): the one place that builds its command lines, runs them,
reads their JSON progress lines and hands them files. Django reaches the trainer only through here.

A snapshot is handed over as a local file: where the storage has no local path (S3 and other object stores)
it is downloaded to a temporary file first, so a `train` worker on another host trains on what the
`default` worker froze. Rows rendered for a checkpoint that reads screenshots name them ``images/<name>``,
relative to the JSONL (as in the export bundle): such a snapshot is laid out as data.jsonl beside images/.

Training through TRL (sft and dpo of any checkpoint, rl of one whose config.json has a ``vision_config``) runs in
``LOUPE_TRAIN_PROCESSES`` processes on the worker's machine, one a GPU, under
``LOUPE_TRAIN_LAUNCHER`` (``torchrun``, or ``accelerate`` with ``LOUPE_TRAIN_LAUNCH_CONFIG``: trainer/launch/*.yaml
for DDP, FSDP, DeepSpeed ZeRO-3). Only rank 0 writes stdout, so the progress lines read here are the same as
from one process. Multi-node runs are started by hand (trainer/README.md): a worker launches on its own machine.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import psutil
import yaml
from django.conf import settings
from django.core.files.storage import default_storage

from core.errors import ApplicationError
from snapshots.export import screenshot_names
from snapshots.rows import image_path

log = logging.getLogger(__name__)

# Commands that train through TRL, for every model (a launcher may run them in several processes)
TRAINING_COMMANDS = ("sft", "dpo", "rl")
LAUNCHERS = ("torchrun", "accelerate")


def command(name: str, *args: str, **options) -> list[str]:
    """``python -m trainer NAME ARGS --option value ...``; options that are None or "" are left out, True is a
    bare flag and False its --no- form; underscores become dashes. A training command through TRL (sft, dpo and rl of
    any checkpoint) goes under the configured launcher when more than one process is
    asked for (:func:`launcher`)."""
    argv = ["-m", "trainer", name, *args]
    for key, value in options.items():
        if value is None or value == "":
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False:
            argv.append("--no-" + key.replace("_", "-"))
        else:
            argv += [flag, str(value)]
    prefix = launcher() if name in TRAINING_COMMANDS else []
    return [sys.executable, *prefix, *argv]


def reads_images(init: str) -> bool:
    """Whether ``init`` is a vision-language checkpoint dir (its config.json has a ``vision_config``): its rows
    carry screenshots."""
    file = Path(init) / "config.json" if init else None
    if file is None or not file.is_file():
        return False
    try:
        return "vision_config" in json.loads(file.read_text())
    except (OSError, ValueError):
        return False  # the trainer itself says what is wrong with the dir


def launcher() -> list[str]:
    """The launcher's part of a command line (after the interpreter) for ``LOUPE_TRAIN_PROCESSES`` processes on
    this machine; empty for one. A setting that cannot work is refused here, in words, before anything starts."""
    processes, name = settings.LOUPE_TRAIN_PROCESSES, settings.LOUPE_TRAIN_LAUNCHER
    config = str(settings.LOUPE_TRAIN_LAUNCH_CONFIG or "")
    if not isinstance(processes, int) or processes < 1:
        raise ApplicationError(f"LOUPE_TRAIN_PROCESSES must be a whole number of processes, 1 or more "
                               f"(one a GPU); it is {processes!r}.")
    if name not in LAUNCHERS:
        raise ApplicationError(f"LOUPE_TRAIN_LAUNCHER must be one of {', '.join(LAUNCHERS)}; it is {name!r}.")
    if config and name != "accelerate":
        raise ApplicationError("LOUPE_TRAIN_LAUNCH_CONFIG is an accelerate config: set LOUPE_TRAIN_LAUNCHER=accelerate "
                               "to use it.")
    if processes == 1:
        return []
    if name == "torchrun":  # --standalone: a free port of its own, so two runs on one machine do not meet
        return ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]
    # without a config accelerate starts ONE process on a machine without GPUs: DDP's config is the default
    path = Path(config or "trainer/launch/ddp.yaml")
    path = path if path.is_absolute() else Path(settings.BASE_DIR) / path
    _check_launch_config(path)
    return ["-m", "accelerate.commands.launch", "--config_file", str(path), "--num_processes", str(processes),
            "--main_process_port", "0"]  # a free port, as torchrun's --standalone


def _check_launch_config(path: Path) -> None:
    """An accelerate config the worker can launch: readable, one machine, and DeepSpeed installed if it asks
    for it (accelerate would only say so in a traceback)."""
    try:
        config = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ApplicationError(f"LOUPE_TRAIN_LAUNCH_CONFIG {path} cannot be read as an accelerate config "
                               f"({type(exc).__name__}: {exc}).") from exc
    if not isinstance(config, dict):
        raise ApplicationError(f"LOUPE_TRAIN_LAUNCH_CONFIG {path} is not an accelerate config (a YAML mapping).")
    if str(config.get("num_machines") or 1) != "1":
        raise ApplicationError(f"LOUPE_TRAIN_LAUNCH_CONFIG {path} spans {config['num_machines']} machines; a train "
                               "worker launches on its own machine only. Start multi-node runs by hand "
                               "(trainer/README.md), or use a one-machine config.")
    if config.get("distributed_type") == "DEEPSPEED" and importlib.util.find_spec("deepspeed") is None:
        raise ApplicationError(f"LOUPE_TRAIN_LAUNCH_CONFIG {path} uses DeepSpeed, which is not installed on this "
                               "train worker: pip install deepspeed in its image (trainer/README.md), or use "
                               "trainer/launch/fsdp.yaml.")


def shown(argv: list[str]) -> str:
    """A command line as a run's log shows it (the interpreter as ``python``)."""
    return " ".join(["python", *argv[1:]])


def start(argv: list[str], env: dict[str, str] | None = None, stderr=None) -> subprocess.Popen | WarmProcess:
    """Start one trainer command (``argv`` from :func:`command`) in the repository, with a pipe for its stdout and
    one for its stderr unless ``stderr`` is an open file to write it to (text): in a child of the warm trainer when
    ``LOUPE_TRAINER_WARM`` names one that answers and takes it (trainer/warm.py), else as a subprocess. Either gives
    a pid to signal, the same lines and the exit status."""
    env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    warm = settings.LOUPE_TRAINER_WARM
    if warm and argv[1:3] == ["-m", "trainer"]:  # not under a launcher
        proc = WarmProcess.start(warm, argv, env, str(settings.BASE_DIR), stderr=stderr)
        if proc is not None:
            return proc
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr or subprocess.PIPE, text=True, bufsize=1,
                            cwd=settings.BASE_DIR, env=env)


class WarmProcess:
    """A trainer command running in a forked child of the warm trainer: the part of ``subprocess.Popen`` that
    :func:`stream` and its callers use (pid, stdout, stderr, poll, wait, terminate, kill, returncode). The warm
    trainer tells the exit status over the connection the command was asked on."""

    def __init__(self, connection: socket.socket, pid: int, stdout: int, stderr: int | None) -> None:
        self.args, self.pid, self.returncode = None, pid, None
        self._connection, self._buffer, self._lock = connection, b"", threading.Lock()  # one reader of the status
        self.stdout = open(stdout, encoding="utf-8", errors="replace")
        self.stderr = None if stderr is None else open(stderr, encoding="utf-8", errors="replace")

    @classmethod
    def start(cls, path: str, argv: list[str], env: dict[str, str], cwd: str, stderr=None) -> WarmProcess | None:
        """The command started in the warm trainer at ``path`` (its stderr to the open file ``stderr``, or a
        pipe); None when none answers there or it says the command must run cold (why is logged)."""
        request = json.dumps({"argv": argv[3:], "env": env, "cwd": cwd, "executable": argv[0],
                              "requester": os.getpid()}).encode() + b"\n"
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe() if stderr is None else (None, os.dup(stderr.fileno()))
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        answer = b""
        try:
            connection.settimeout(30)
            connection.connect(path)
            socket.send_fds(connection, [request], [out_w, err_w])
            while not answer.endswith(b"\n"):
                chunk = connection.recv(4096)
                if not chunk:
                    break
                answer += chunk
            reply = json.loads(answer or b"{}")
        except (OSError, ValueError) as exc:
            reply = {"cold": f"no warm trainer answers at {path} ({type(exc).__name__}: {exc})"}
        finally:
            os.close(out_w)
            os.close(err_w)
        if "pid" not in reply:
            log.info("trainer command runs cold: %s", reply.get("cold") or "the warm trainer gave no pid")
            connection.close()
            os.close(out_r)
            if err_r is not None:
                os.close(err_r)
            return None
        connection.settimeout(None)
        return cls(connection, int(reply["pid"]), out_r, err_r)

    def poll(self) -> int | None:
        # another thread may be in wait(): the exit status is then its to read, and this says "still running"
        if self.returncode is None and self._lock.acquire(blocking=False):
            try:
                self._read_status(0.0)
            except BlockingIOError:
                pass
            finally:
                self._lock.release()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._lock.acquire(timeout=-1 if timeout is None else timeout):
                raise subprocess.TimeoutExpired(f"trainer (pid {self.pid})", timeout)
            try:
                self._read_status(timeout)
            except (TimeoutError, BlockingIOError):
                raise subprocess.TimeoutExpired(f"trainer (pid {self.pid})", timeout) from None
            finally:
                self._lock.release()
        return self.returncode

    def _read_status(self, timeout: float | None) -> None:
        """Read the warm trainer's status line, waiting at most ``timeout`` seconds (0: not at all, None: until it
        comes); with the lock held."""
        if self.returncode is not None:
            return
        self._connection.settimeout(timeout)
        try:
            self._read()
        finally:
            if self.returncode is None:
                self._connection.settimeout(None)

    def _read(self) -> None:
        while not self._buffer.endswith(b"\n"):
            chunk = self._connection.recv(4096)
            if not chunk:  # the warm trainer ended first: the child's status went with it
                log.warning("the warm trainer went away before trainer pid %d ended; its status is unknown", self.pid)
                while psutil.pid_exists(self.pid):
                    threading.Event().wait(0.2)
                self.returncode = 1
                self._connection.close()
                return
            self._buffer += chunk
        self.returncode = int(json.loads(self._buffer)["returncode"])
        self._connection.close()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def stream(argv: list[str], on_progress, env: dict[str, str] | None = None, on_start=None) -> tuple[dict, str, int]:
    """Run one trainer command (:func:`start`), calling ``on_progress(item)`` for each JSON progress line (those with
    "step"). ``env`` adds to its environment (secrets such as a token, kept off the command line the log shows);
    ``on_start(proc)`` is handed the process once it runs (so that another thread may stop it).
    Returns (the final {"done": true} line, stderr, exit status)."""
    proc = start(argv, env)
    if on_start is not None:
        on_start(proc)
    final: dict = {}
    stderr_chunks: list[str] = []

    def drain():
        for line in proc.stderr:
            stderr_chunks.append(line)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    for line in proc.stdout:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if item.get("done"):
            final = item
        elif "step" in item:
            on_progress(item)
    proc.wait()
    reader.join(timeout=5)
    proc.stdout.close()
    if not reader.is_alive():
        proc.stderr.close()
    return final, "".join(stderr_chunks), proc.returncode


def adapter_check(adapter: str, base: str) -> str:
    """'' when vLLM serving the checkpoint dir ``base`` would apply every tensor of the LoRA adapter dir ``adapter``
    (trainer/adapters.py: names renamed as vLLM renames them, shapes from the safetensors headers); otherwise what
    does not fit, in one line."""
    proc = subprocess.run([sys.executable, "-m", "trainer.adapters", adapter, base], capture_output=True, text=True,
                          cwd=settings.BASE_DIR, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode not in (0, 2) or not lines:
        return f"the adapter check failed ({failure('adapter check', proc.returncode, proc.stderr)})"
    return json.loads(lines[-1])["problem"]


def failure(phase: str, returncode: int, stderr: str) -> str:
    """One line for a person: which trainer command failed, and its ``error:`` line (a launcher's report of the
    failed processes comes after it) or else the last thing it said."""
    lines = stderr.strip().splitlines()
    said = [line for line in lines if line.startswith("error: ")][-1:] or lines[-1:] or ["no output"]
    if returncode == -signal.SIGKILL:  # nothing in the trainer sends it: the kernel (out of memory) or a person
        return (f"trainer {phase} was killed (SIGKILL), most likely by the kernel for want of memory (see the host's "
                f"`dmesg`); its last words: {said[0]}")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:  # a number the enum has no name for (a real-time signal)
            name = f"signal {-returncode}"
        return f"trainer {phase} was stopped by {name}: {said[0]}"
    return f"trainer {phase} exited with {returncode}: {said[0]}"


@contextlib.contextmanager
def snapshot_local(snapshot):
    """The snapshot's JSONL as a local path for the trainer. When its rows carry screenshots (rendered for a
    checkpoint that reads them), a temporary folder laid out as the export bundle: data.jsonl and images/<name>
    (links to the stored files where the storage has local paths, else downloads), removed afterwards."""
    if not ((snapshot.lineage or {}).get("rendered_for") or {}).get("reads_images"):
        with local_file(snapshot.file) as path:
            yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="loupe-snapshot-"))
    try:
        _place(snapshot.file, folder / "data.jsonl", link=False)  # the trainer finds images/ beside its real path
        (folder / "images").mkdir()
        for name in screenshot_names(snapshot):
            _place(name, folder / image_path(name))
        yield folder / "data.jsonl"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _place(name: str, target: Path, link: bool = True) -> None:
    """A stored file at ``target``: a link to it where the storage has local paths (a copy unless ``link``), else a
    download."""
    try:
        path = Path(default_storage.path(name))
    except NotImplementedError:  # object storage: no local path
        path = None
    if path is not None and not path.is_file():
        raise ApplicationError(f"The file {name} the snapshot's rows need is missing from storage.", status=409)
    if path is not None and link:
        target.symlink_to(path)
        return
    try:
        with default_storage.open(name, "rb") as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, length=1 << 20)
    except Exception as exc:  # the storage's own errors (botocore's, ...): say which file, in one line
        raise ApplicationError(f"The file {name} the snapshot's rows need could not be read from storage "
                               f"({type(exc).__name__}: {exc}).", status=409) from exc


@contextlib.contextmanager
def local_file(name: str):
    """A stored file (a snapshot's JSONL) as a local path for the trainer: the file itself where the storage has
    local paths, else a temporary copy downloaded from the storage, removed afterwards."""
    try:
        path = Path(default_storage.path(name))
    except NotImplementedError:  # object storage: no local path
        path = None
    if path is not None:
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="loupe-snapshot-"))
    try:
        target = folder / Path(name).name
        try:
            with default_storage.open(name, "rb") as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out, length=1 << 20)
        except Exception as exc:  # the storage's own errors (botocore's, ...): say which file, in one line
            raise ApplicationError(f"The snapshot file {name} could not be read from storage "
                                   f"({type(exc).__name__}: {exc}).", status=409) from exc
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)
