"""``python -m trainer warm --socket PATH``: a trainer that has already imported what its commands import.

A trainer command spends most of a short run importing torch, transformers, TRL, PEFT and datasets (8-11 s on
this machine's cores, against well under a second of work for a small model's evaluation). The warm trainer
imports them once, then waits on a Unix socket; each request forks it, and the child runs the command exactly as
``python -m trainer ARGS`` would (the same ``main``), with the requester's environment, directory, stdout and
stderr. The requester sees a process whose pid it may signal, whose stdout carries the progress lines and whose
exit status it is told (training/trainer_process.py holds the requesting side; nothing else changes for it).

The protocol, one connection a command:

- the requester sends one JSON line ``{"argv": [...], "env": {...}, "cwd": "...", "executable": "...",
  "requester": PID}`` with two descriptors attached (SCM_RIGHTS): the write ends of the child's stdout and stderr;
  the child ends when the requester's process does, as a subprocess in its process group would;
- the warm trainer answers ``{"pid": N}``; or ``{"cold": "why"}`` when the command must start a fresh
  interpreter instead (below), and closes;
- once the child ends, ``{"returncode": R}`` (negative for a signal, as ``subprocess`` has it), then closes.

A command runs cold (the requester starts ``python -m trainer`` itself) when what the imports have already read
differs: an environment variable that torch, transformers, datasets or their libraries read at import time
(``IMPORT_TIME_ENV``) set otherwise than in the warm trainer, or an interpreter other than this one. Commands
that run under a launcher (torchrun, accelerate) never come here.

The server is one thread: forking a process with threads would hand the child locks that no thread releases.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import re
import select
import selectors
import signal
import socket
import struct
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger("trainer.warm")

# What the commands import (COMMANDS' targets and what they import); a module that fails to import is left cold.
PRELOAD = ("torch", "transformers", "datasets", "peft", "trl", "trainer.trl_trainers", "trainer.sft", "trainer.dpo",
           "trainer.grpo", "trainer.env_grpo", "trainer.evaluate", "trainer.serve", "trainer.vlm_serve",
           "trainer.demos", "trainer.coldstart", "trainer.tokenizer", "trainer.base")
# Environment variables read while those modules import (their values are then fixed in the warm process)
IMPORT_TIME_ENV = re.compile(r"^(HF_|HUGGINGFACE_|TRANSFORMERS_|DIFFUSERS_|TORCH|PYTORCH_|CUDA_|NVIDIA_|NCCL_|OMP_|"
                             r"MKL_|KMP_|OPENBLAS_|TOKENIZERS_|ARROW_|PYTHON|LD_|ACCELERATE_|TRL_|WANDB_|PEFT_|XDG_)")
# ... except those read only when used, which torch itself writes into os.environ once it has chosen them (inductor's
# cache_dir() sets TORCHINDUCTOR_CACHE_DIR): a process that touched them sends them set, and every later command of
# that process ran cold (every trainer command of a pytest worker after its first test that reached inductor's cache);
# and TRL's notice switch, which trainer/env_grpo.py sets when it trains and GRPOTrainer reads when it is built.
READ_AT_USE = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TRL_EXPERIMENTAL_SILENCE"})
MAX_REQUEST = 1 << 20
POLL_SECONDS = 0.05


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in env.items() if IMPORT_TIME_ENV.match(key) and key not in READ_AT_USE}


def cold_reason(request: dict, started_env: dict[str, str]) -> str:
    """'' when the request's command can run in a child of this process, whose environment was ``started_env``
    before it imported anything (imports set some variables themselves); otherwise why it cannot."""
    if request.get("executable") not in (None, sys.executable):
        return f"another interpreter ({request['executable']})"
    ours, theirs = import_time_env(started_env), import_time_env(request.get("env") or {})
    differs = sorted(key for key in ours.keys() | theirs.keys() if ours.get(key) != theirs.get(key))
    return f"set otherwise than in the warm trainer: {', '.join(differs)}" if differs else ""


def preload() -> None:
    """Import PRELOAD; a module that fails is said on stderr and left to the commands that need it."""
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a command that needs it says why when it runs cold
            log.warning("warm trainer: %s does not import (%s: %s); commands needing it import it themselves",
                        name, type(exc).__name__, exc)


def serve(argv: list[str]) -> list[str]:
    """Run the warm trainer (never returns in it). In each forked child, returns that child's trainer arguments:
    the caller runs them as ``python -m trainer`` would."""
    parser = argparse.ArgumentParser(prog="python -m trainer warm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="the Unix socket to listen on (made anew)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    started, started_env = time.monotonic(), dict(os.environ)
    preload()
    path = Path(args.socket)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path.with_name(path.name + ".new")))
    os.chmod(path.with_name(path.name + ".new"), 0o600)  # only this user's processes ask it (and it checks: _start)
    listener.listen(64)
    os.replace(path.with_name(path.name + ".new"), path)  # the socket appears once it accepts
    log.info("warm trainer ready on %s after %.1f s (pid %d)", path, time.monotonic() - started, os.getpid())
    server_pid = os.getpid()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    try:
        while not stopping:
            for _ in selector.select(POLL_SECONDS):
                connection = listener.accept()[0]
                child = _start(connection, listener, selector, children, started_env)
                if child is not None:
                    return child
            _reap(children)
    finally:
        if os.getpid() == server_pid:
            path.unlink(missing_ok=True)
            listener.close()
    sys.exit(0)


def _start(connection: socket.socket, listener, selector, children, started_env) -> list[str] | None:
    """Answer one request: fork its child (returning its arguments in the child) or say why it runs cold."""
    fds: list[int] = []
    try:
        _, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                                struct.calcsize("3i")))
        if uid != os.getuid():
            raise ValueError(f"user {uid} may not run this user's commands")
        connection.settimeout(10)
        data, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST, 2)
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            more = connection.recv(MAX_REQUEST)
            if not more:
                break
            data += more
        request = json.loads(data)
        if len(fds) != 2 or not isinstance(request.get("argv"), list):
            raise ValueError("a request is a JSON line with argv, env and cwd, and two descriptors")
        reason = cold_reason(request, started_env)
    except (OSError, ValueError) as exc:
        reason = f"unreadable request ({type(exc).__name__}: {exc})"
    if reason:
        log.info("runs cold: %s", reason)
        _answer(connection, {"cold": reason})
        for fd in fds:
            os.close(fd)
        connection.close()
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        selector.close()
        listener.close()
        connection.close()
        for other in children.values():
            other.close()
        _become(request, fds)
        return [str(a) for a in request["argv"]]
    for fd in fds:
        os.close(fd)
    _answer(connection, {"pid": pid})
    log.info("pid %d runs %s", pid, " ".join(str(a) for a in request["argv"][:2]))
    children[pid] = connection
    return None


def _become(request: dict, fds: list[int]) -> None:
    """In the forked child: the requester's stdout, stderr, directory, environment and default signals."""
    for signum in (signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in (null, *fds):
        os.close(fd)
    with contextlib.suppress(ImportError):  # ps shows what the child runs, as for a command started cold (before
        import setproctitle  # the environment changes: setproctitle takes over its memory)

        setproctitle.setproctitle(" ".join([sys.executable, "-m", "trainer", *map(str, request["argv"])]))
    os.chdir(request.get("cwd") or ".")
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    sys.stdout.reconfigure(line_buffering=True)
    sys.argv = [sys.argv[0], *request["argv"]]
    if isinstance(request.get("requester"), int):
        _end_with(request["requester"])
    for handler in logging.getLogger().handlers[:]:  # the child's main() sets logging up as a cold start does
        logging.getLogger().removeHandler(handler)


def _end_with(pid: int) -> None:
    """End this child when the process that asked for it ends: a subprocess of the requester would have gone with
    its process group (a worker killed with its children, a test's stack stopped), and a command whose requester is
    gone writes for no one."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # already gone
        os.kill(os.getpid(), signal.SIGKILL)
        return

    def watch():
        select.select([fd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="requester-watch", daemon=True).start()


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is not None:
            _answer(connection, {"returncode": os.waitstatus_to_exitcode(status)})
            connection.close()


def _answer(connection: socket.socket, message: dict) -> None:
    try:
        connection.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the requester went away; the child runs on, as a subprocess would
