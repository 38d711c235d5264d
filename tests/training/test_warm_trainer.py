"""The warm trainer (trainer/warm.py) and its requesting side (training/trainer_process.start): a command run in
its forked child gives what the command gives started cold, and every way it can go wrong ends as a cold command
would, or starts one cold."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from django.conf import settings

from tests.stack import wait_for
from training import trainer_process
from training.trainer_process import WarmProcess

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """This module's own warm trainer (not the session's: these tests send it garbage and stop it); yields
    (socket path, process) once it answers."""
    path = tmp_path_factory.mktemp("warm-test") / "w.sock"
    log = path.with_name("warm.log")
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "trainer", "warm", "--socket", str(path)], cwd=ROOT,
                                   stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: path.exists() or process.poll() is not None, 180, interval=0.2, what="the warm trainer")
        assert process.poll() is None, log.read_text()[-2000:]
        yield path, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.fixture
def use(warm, monkeypatch):
    """Commands started through training/trainer_process.py go to this module's warm trainer."""
    monkeypatch.setattr(settings, "LOUPE_TRAINER_WARM", str(warm[0]))
    return warm


def _rows(path: Path, n: int = 20) -> Path:
    rows = [{"messages": [{"role": "user", "content": "Instruction: click the button"},
                          {"role": "assistant", "content": f"Thought: t\nAction: click(x={i}, y={2 * i})"}]}
            for i in range(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _sft(tmp_path: Path, out: str, *more: str) -> list[str]:
    return trainer_process.command("sft", "--data", str(_rows(tmp_path / "rows.jsonl")), "--init", "tiny", "--out",
                                   str(tmp_path / out), "--max-steps", "6", "--log-every", "2", "--lr", "3e-3", *more)


def _run(argv: list[str]):
    """(process, progress lines, the done line, stderr, exit status) of one command through trainer_process."""
    started = []
    progress = []
    final, stderr, returncode = trainer_process.stream(argv, progress.append, on_start=started.append)
    return started[0], progress, final, stderr, returncode


def test_a_command_in_a_warm_child_gives_what_it_gives_started_cold(use, tmp_path, monkeypatch):
    path, server = use
    proc, progress, final, stderr, returncode = _run(_sft(tmp_path, "warm"))
    assert isinstance(proc, WarmProcess) and returncode == 0, stderr
    assert proc.pid != server.pid and not psutil.pid_exists(proc.pid)
    monkeypatch.setattr(settings, "LOUPE_TRAINER_WARM", "")
    cold, cold_progress, cold_final, cold_stderr, cold_returncode = _run(_sft(tmp_path, "cold"))
    assert isinstance(cold, subprocess.Popen) and cold_returncode == 0, cold_stderr

    def figures(lines):
        return [{k: v for k, v in line.items() if "_s" not in k and "second" not in k} for line in lines]  # not the speeds

    assert [p["step"] for p in progress] == [2, 4, 6]
    assert figures(progress) == figures(cold_progress)
    assert final["out"] == str(tmp_path / "warm") and cold_final["out"] == str(tmp_path / "cold")
    assert final["metrics"]["final_loss"] == cold_final["metrics"]["final_loss"]
    assert (tmp_path / "warm" / "model.safetensors").read_bytes() == (tmp_path / "cold" / "model.safetensors").read_bytes()


def test_bad_input_exits_2_with_its_words_from_a_warm_child(use, tmp_path):
    argv = trainer_process.command("sft", "--data", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "c"))
    proc, progress, final, stderr, returncode = _run(argv)
    assert isinstance(proc, WarmProcess)
    assert returncode == 2 and "does not exist" in stderr and final == {} and progress == []
    bad = trainer_process.command("sft", "--no-such-option", "1")
    proc, _, _, stderr, returncode = _run(bad)
    assert isinstance(proc, WarmProcess) and returncode == 2 and "unrecognized arguments" in stderr


def test_a_killed_warm_child_reports_the_signal_as_a_subprocess_does(use, tmp_path):
    proc = trainer_process.start(_sft(tmp_path, "long", "--max-steps", "100000", "--log-every", "1"))
    assert isinstance(proc, WarmProcess)
    first = proc.stdout.readline()
    assert json.loads(first)["step"] == 1 and proc.poll() is None
    assert "sft" in psutil.Process(proc.pid).cmdline()  # ps shows the command, not the warm trainer's
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(proc.wait(timeout=60)))
    waiter.start()  # as an evaluation lane waits while another lane's thread polls it to stop it
    time.sleep(0.2)
    assert proc.poll() is None
    proc.kill()
    waiter.join(timeout=60)
    assert waited == [-signal.SIGKILL]
    assert proc.poll() == -signal.SIGKILL and proc.wait(timeout=1) == -signal.SIGKILL
    proc.stdout.close()
    proc.stderr.close()


REQUESTER = """
import os, sys, time
import django
django.setup()
from training.trainer_process import WarmProcess
proc = WarmProcess.start(sys.argv[1], sys.argv[2:], dict(os.environ), os.getcwd())
print(proc.pid, flush=True)
time.sleep(600)
"""


def test_a_warm_child_ends_with_the_process_that_asked_for_it(use, tmp_path):
    """As a subprocess goes with its worker's process group: a command whose requester was killed writes for no one."""
    path, _ = use
    argv = _sft(tmp_path, "orphan", "--max-steps", "100000")
    requester = subprocess.Popen([sys.executable, "-c", REQUESTER, str(path), *argv], cwd=ROOT, stdout=subprocess.PIPE,
                                 text=True, env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings"})
    try:
        child = int(requester.stdout.readline())
        assert psutil.pid_exists(child)
        requester.kill()
        requester.wait()
        wait_for(lambda: not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE, 30,
                 what="the orphaned trainer to end")
    finally:
        if requester.poll() is None:
            requester.kill()


def test_what_the_imports_read_set_otherwise_runs_cold_and_garbage_is_answered(use, tmp_path, monkeypatch, caplog):
    """... while a cache directory torch writes into the environment once it has used it (inductor's) stays warm."""
    path, server = use
    monkeypatch.setenv("HF_HUB_OFFLINE", "0" if os.environ.get("HF_HUB_OFFLINE") == "1" else "1")
    with caplog.at_level("INFO", logger="training.trainer_process"):
        proc, _, final, stderr, returncode = _run(_sft(tmp_path, "offline"))
    assert isinstance(proc, subprocess.Popen) and returncode == 0, stderr
    assert "runs cold: set otherwise than in the warm trainer: HF_HUB_OFFLINE" in caplog.text
    monkeypatch.undo()
    for garbage in (b"not json\n", b'{"argv": "sft"}\n', b"\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
            raw.settimeout(20)
            raw.connect(str(path))
            raw.sendall(garbage)
            assert "unreadable request" in json.loads(raw.makefile().readline())["cold"]
    assert server.poll() is None
    monkeypatch.setattr(settings, "LOUPE_TRAINER_WARM", str(path))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    proc, _, _, stderr, returncode = _run(_sft(tmp_path, "after-garbage"))
    assert isinstance(proc, WarmProcess) and returncode == 0, stderr


def test_with_no_warm_trainer_there_a_command_starts_cold(tmp_path, monkeypatch):
    (tmp_path / "stale.sock").write_text("")  # a socket file left by a warm trainer that was killed, or none at all
    for path in (tmp_path / "stale.sock", tmp_path / "none.sock"):
        monkeypatch.setattr(settings, "LOUPE_TRAINER_WARM", str(path))
        argv = trainer_process.command("sft", "--data", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "c"))
        proc, _, _, stderr, returncode = _run(argv)
        assert isinstance(proc, subprocess.Popen) and returncode == 2 and "does not exist" in stderr


def test_the_warm_trainer_stops_on_sigterm_and_takes_its_socket_away(warm):
    path, server = warm  # the module's last test: it stops the module's warm trainer
    started = time.monotonic()
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=20) == 0 and time.monotonic() - started < 20
    assert not path.exists()
