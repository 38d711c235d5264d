"""The trainer as a program (``python -m trainer``): the one place that builds its command lines, runs them,
reads their JSON progress lines and hands them files. Django reaches the trainer only through here.

A snapshot is handed over as a local file: where the storage has no local path (S3 and other object stores)
it is downloaded to a temporary file first, so a `train` worker on another host trains on what the
`default` worker froze.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage

from core.errors import ApplicationError


def command(name: str, *args: str, **options) -> list[str]:
    """``python -m trainer NAME ARGS --option value ...``; options that are None or "" are left out, True is a
    bare flag and False its --no- form; underscores become dashes."""
    argv = [sys.executable, "-m", "trainer", name, *args]
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
    return argv


def shown(argv: list[str]) -> str:
    """A command line as a run's log shows it (without the interpreter)."""
    return "python -m trainer " + " ".join(argv[3:])


def stream(argv: list[str], on_progress) -> tuple[dict, str, int]:
    """Run one trainer command, calling ``on_progress(item)`` for each JSON progress line (those with
    "step"). Returns (the final {"done": true} line, stderr, exit status)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                            cwd=settings.BASE_DIR, env={**os.environ, "PYTHONUNBUFFERED": "1"})
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
    return final, "".join(stderr_chunks), proc.returncode


def failure(phase: str, returncode: int, stderr: str) -> str:
    """One line for a person: which trainer command failed, and the last thing it said."""
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return f"trainer {phase} exited with {returncode}: {tail[0]}"


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
