"""`make run` (manage.py loupe_run) keeps the terminal for people: no request lines, no Celery banners there;
each process's full output in its log file, warnings and errors on the terminal as well."""
import io
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.stack import free_port, stack_env, wait_for
from webapp.management.commands.loupe_run import process_commands, relay


def commands(tmp_path: Path) -> dict[str, list[str]]:
    return process_commands(python="/py", host="127.0.0.1", port=8000, log_dir=tmp_path / "logs",
                            beat_schedule=tmp_path / "schedule", rollout_concurrency="3", worker_log_level="WARNING")


def test_daphne_writes_its_access_log_to_a_file_not_the_terminal(tmp_path):
    web = commands(tmp_path)["web"]
    assert web[web.index("--access-log") + 1] == str(tmp_path / "logs" / "access.log")
    assert web[-1] == "webapp.asgi:application"


def test_workers_and_beat_run_at_the_chosen_log_level_on_their_queues(tmp_path):
    argv = commands(tmp_path)
    queues = {name: args[args.index("-Q") + 1] for name, args in argv.items() if "-Q" in args}
    # people's episodes and their audio have workers of their own: machines' work cannot fill them
    assert queues == {"live": "live", "audio": "audio", "rollouts": "rollouts", "jobs": "default", "train": "train"}
    from webapp.celery import app
    assert set(queues.values()) == {queue.name for queue in app.conf.task_queues}  # every queue has a worker
    assert argv["rollouts"][argv["rollouts"].index("-c") + 1] == "3" and argv["live"][argv["live"].index("-c") + 1] == "2"
    for name in ("live", "audio", "rollouts", "jobs", "train", "beat"):
        assert argv[name][argv[name].index("--loglevel") + 1] == "WARNING"
    assert argv["beat"][argv["beat"].index("-s") + 1] == str(tmp_path / "schedule")


def test_relay_copies_a_process_warnings_to_its_log_and_to_the_terminal_marked_with_its_name():
    stream, log, terminal = io.BytesIO(b"WARNING one\nERROR two\n"), io.BytesIO(), io.BytesIO()
    relay("worker", stream, log, terminal)
    assert log.getvalue() == b"WARNING one\nERROR two\n"
    assert terminal.getvalue() == b"[worker] WARNING one\n[worker] ERROR two\n"


def test_relay_keeps_djangos_line_per_refused_request_off_the_terminal():
    lines = (b"2026-01-01 10:00:00,000 WARNING django.request: Unauthorized: /api/v1/auth/session\n"
             b"2026-01-01 10:00:01,000 ERROR django.request: Internal Server Error: /api/v1/x\n")
    log, terminal = io.BytesIO(), io.BytesIO()
    relay("web", io.BytesIO(lines), log, terminal)
    assert log.getvalue() == lines
    assert terminal.getvalue() == b"[web] " + lines.splitlines(keepends=True)[1]


@pytest.mark.django_db(transaction=True)
def test_the_web_process_as_started_prints_no_line_per_request(tmp_path):
    """Daphne started with loupe_run's argv: requests land in access.log, nothing in its terminal output."""
    port = free_port()
    argv = process_commands(python=sys.executable, host="127.0.0.1", port=port, log_dir=tmp_path,
                            beat_schedule=tmp_path / "schedule")["web"]
    out = tmp_path / "web.out"
    with open(out, "wb") as handle:
        proc = subprocess.Popen(argv, env=stack_env(), stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        def served():
            if proc.poll() is not None:
                raise AssertionError(f"daphne exited:\n{out.read_text()}")
            try:
                urllib.request.urlopen(base + "/login", timeout=1).read()
                return True
            except OSError:
                return False

        wait_for(served, 30, what="daphne")
        for _ in range(3):
            urllib.request.urlopen(base + "/login", timeout=5).read()
        wait_for(lambda: (tmp_path / "access.log").exists()
                 and (tmp_path / "access.log").read_text().count('"GET /login') >= 4, 10, what="the access log")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    printed = out.read_text()
    assert "GET /login" not in printed and "/login" not in printed, printed
