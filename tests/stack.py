"""Real processes for tests: daphne and Celery workers on the test database and the test Redis prefix."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest

__all__ = ["ChatModel", "ProcessStack", "process_stack", "stack_env", "daphne_server", "celery_worker", "free_port", "wait_for",
           "start_daphne", "start_worker", "start_together", "module_stack", "session_stack", "module_celery_worker",
           "worker_quiet", "warm_trainer", "trainer_start", "trainer_run"]

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def _test_database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    auth = quote(s["USER"] or "postgres")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    host = s.get("HOST") or ""
    if host.startswith("/"):
        return f"postgresql://{auth}@/{s['NAME']}?host={host}"
    return f"postgresql://{auth}@{host or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def stack_env(**extra) -> dict:
    from django.conf import settings

    env = dict(os.environ)
    env.update({
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "LOUPE_CHANNEL_PREFIX": settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"],
        "LOUPE_MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "PYTHONUNBUFFERED": "1",
    })
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # servers run as in production (see tests/testenv.py)
    env.update({k: str(v) for k, v in extra.items()})
    return env


@dataclass
class ProcessStack:
    processes: list[subprocess.Popen]
    logs: list[Path]

    def start(self, name: str, argv: list[str], env: dict, log_dir: Path) -> subprocess.Popen:
        log = log_dir / f"{name}.log"
        handle = open(log, "wb")
        proc = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes.append(proc)
        self.logs.append(log)
        return proc

    def stop(self, grace: float = 3.0):
        for proc in self.processes:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.processes:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
                         for log in self.logs if log.exists())


def start_daphne(stack: ProcessStack, tmp_path: Path, env: dict, name: str = "daphne") -> str:
    port = free_port()
    stack.start(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
                env, tmp_path)
    base = f"http://127.0.0.1:{port}"

    def up():
        try:
            urllib.request.urlopen(base + "/api/v1/auth/session", timeout=1)
        except urllib.error.HTTPError:
            return True  # 401 means it is serving
        except OSError:
            return False
        return True

    wait_for(up, 30, what=f"daphne on {base}\n{stack.tail()}")
    return base


class ChatModel(BaseHTTPRequestHandler):
    """A policy server's handler answering OpenAI chat completions with the text ``answer(body)`` returns."""

    def answer(self, body: dict) -> str:
        raise NotImplementedError

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = self.answer(body)
        reply = json.dumps({"model": body["model"], "choices": [{"message": {"role": "assistant", "content": text}}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply.encode())

    def log_message(self, *args):
        pass


def start_policy_server(handler) -> ThreadingHTTPServer:
    """A policy server the test writes (an http.server handler answering chat completions) on a free port,
    served from a thread; the caller shuts it down."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def deploy_served_checkpoint(project, folder: Path, name: str):
    """A tiny checkpoint (its files whole, as a deployment needs) deployed on the `openai` backend under
    `name`: the rollouts of `project` then ask the policy server for that model."""
    from training import deployments
    from rollouts.models import Checkpoint
    from trainer.model import save_tiny_untrained

    checkpoint = Checkpoint.objects.create(project=project, name=name, uri=str(save_tiny_untrained(folder / name)))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="openai", served_name=name)
    return checkpoint


def start_worker(stack: ProcessStack, tmp_path: Path, env: dict, queues: str = "live,rollouts,audio,default,train",
                 name: str = "worker", concurrency: int = 1) -> subprocess.Popen:
    from celery.utils.nodenames import host_format
    from django.conf import settings

    node = host_format(f"{name}{os.getpid()}@%h")
    argv = [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queues, "-n", node,
            "-c", str(concurrency), "--pool", "prefork", "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
    proc = stack.start(name, argv, env, tmp_path)
    if (env.get("REDIS_URL"), env.get("LOUPE_CHANNEL_PREFIX")) == (
            settings.REDIS_URL, settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"]):
        _WORKERS[node] = proc  # on this process's broker: worker_quiet asks it

    def ready():
        if proc.poll() is not None:
            raise AssertionError(f"celery worker exited\n{stack.tail()}")
        return "ready" in (tmp_path / f"{name}.log").read_text(errors="replace")

    wait_for(ready, 60, what=f"celery worker\n{stack.tail()}")
    return proc


def start_together(*starts):
    """Call ``starts`` (each starts a server and waits until it is up: ``lambda: start_worker(...)``) side by side and
    return what each returned, in order. A start is mostly a process importing Django, Celery or torch and then
    waiting to be ready: one after another, a fixture's daphne and two workers took the sum of their starts; side by
    side, about the longest (the cores the first leaves idle while it waits are the second's). The first failure is
    raised once every start has ended."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(start) for start in starts]
        return [future.result() for future in futures]


@contextlib.contextmanager
def served_episode_stack(tmp_path: Path, model, *, idle_seconds: float, max_steps: int, checkpoint: str):
    """daphne and a live+rollouts worker whose policy is ``model`` (a ChatModel handler the test writes, served on a
    free port), a project with an annotator ("asked") and a click-button task whose deployed checkpoint the model
    "serves". Yields (base URL, project, task, annotator)."""
    from tests.factories import make_member, make_project, make_task, make_user

    server = start_policy_server(model)
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_SUPERVISED_IDLE_SECONDS=idle_seconds,
                    LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{server.server_address[1]}")
    try:
        base, _ = start_together(lambda: start_daphne(stack, tmp_path, env),
                                 lambda: start_worker(stack, tmp_path, env, queues="live,rollouts"))
        project = make_project()
        annotator = make_user("asked")
        make_member(project, annotator)
        task = make_task(project, "click-button", max_steps=max_steps)
        deploy_served_checkpoint(project, tmp_path, checkpoint)
        yield base, project, task, annotator
    finally:
        stack.stop()
        server.shutdown()


@pytest.fixture
def process_stack(tmp_path):
    """Processes a single test starts (and may kill); stopped when the test ends."""
    stack = ProcessStack([], [])
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def module_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """Servers shared by a test module (they only read and write the test database, which each
    transactional test flushes); starting them once a module keeps the suite fast."""
    stack = ProcessStack([], [])
    with django_db_blocker.unblock():
        yield stack, tmp_path_factory.mktemp("stack")
    stack.stop()


@pytest.fixture(scope="session")
def session_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """Servers shared by every module of a pytest process (an xdist worker): ones no test kills or needs fresh."""
    stack = ProcessStack([], [])
    with django_db_blocker.unblock():
        yield stack, tmp_path_factory.mktemp("session-stack")
    stack.stop()


@pytest.fixture(scope="session", autouse=True)
def warm_trainer(tmp_path_factory):
    """One warm trainer a pytest process (trainer/warm.py), named in ``LOUPE_TRAINER_WARM`` to this process and to
    every server started after it (stack_env copies the environment): the trainer commands that go through
    training/trainer_process.py (a cycle's training and evaluation, the tests' own) run in its forked children with
    torch, transformers and TRL imported once (a tiny model's sft: 3.2 s against 16 s started cold, on this machine
    loaded by a test run). Until it is ready (some 10 s) they start cold, as they do with it gone. The tests of the
    command line itself start ``python -m trainer`` as a subprocess. Yields (socket path, process)."""
    from django.conf import settings

    path = tmp_path_factory.mktemp("warm") / "trainer.sock"
    with open(path.with_name("trainer.log"), "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "trainer", "warm", "--socket", str(path)], cwd=ROOT,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    before = settings.LOUPE_TRAINER_WARM, os.environ.get("LOUPE_TRAINER_WARM")
    settings.LOUPE_TRAINER_WARM = os.environ["LOUPE_TRAINER_WARM"] = str(path)
    yield path, process
    settings.LOUPE_TRAINER_WARM = before[0]
    if before[1] is None:
        os.environ.pop("LOUPE_TRAINER_WARM", None)
    else:
        os.environ["LOUPE_TRAINER_WARM"] = before[1]
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def trainer_start(*args: str, stderr=None):
    """``python -m trainer ARGS`` started as a worker starts it (training/trainer_process.start): in this pytest
    process's warm trainer once it is ready, its stdout a text pipe and its stderr ``stderr`` (an open file) or a
    pipe. For tests that start a command to use it; the command line's own tests start a subprocess."""
    from training import trainer_process

    return trainer_process.start([sys.executable, "-m", "trainer", *args], stderr=stderr)


def trainer_run(*args: str, check: bool = True) -> tuple[int, str, str]:
    """``python -m trainer ARGS`` run to its end as :func:`trainer_start` starts it: (exit status, stdout, stderr);
    with ``check``, a status other than 0 fails the test with the stderr's end."""
    with tempfile.TemporaryFile("w+") as err:
        proc = trainer_start(*args, stderr=err)
        out = proc.stdout.read()
        proc.stdout.close()
        returncode = proc.wait()
        err.seek(0)
        stderr = err.read()
    if check and returncode:
        raise AssertionError(f"python -m trainer {' '.join(args[:1])} exited with {returncode}:\n{stderr[-3000:]}")
    return returncode, out, stderr


@pytest.fixture(scope="session")
def daphne_server(session_stack):
    """A real daphne process serving the app on a free loopback port; yields its base URL. One a pytest process:
    it keeps no state of its own between requests (sessions, caches and the channel layer are in PostgreSQL and
    Redis), all start it with the same environment, and a start and stop took some 3-5 s a module. Tests that kill
    a daphne or need one configured otherwise start their own (``start_daphne``)."""
    stack, path = session_stack
    return start_daphne(stack, path, stack_env())


@pytest.fixture(scope="module")
def module_celery_worker(module_stack):
    stack, path = module_stack
    return start_worker(stack, path, stack_env())


# The workers start_worker started on this process's broker, by node name.
_WORKERS: dict[str, subprocess.Popen] = {}


def worker_quiet(timeout: float = 60) -> None:
    """Wait until no worker is running or holding a task, so a test's database flush cannot collide with one.
    The workers this process started and that still run are asked by name, and the answer is in as soon as each
    has replied (some 30 ms); a broadcast to whoever listens waits out its whole second for stragglers, twice (active
    and reserved) at every test's end. With none of its own running, every worker on the broker is asked."""
    from webapp.celery import app

    def quiet():
        names = [node for node, proc in _WORKERS.items() if proc.poll() is None]
        inspector = app.control.inspect(timeout=1.0, destination=names or None, limit=len(names) or None)
        busy = [inspector.active() or {}, inspector.reserved() or {}]
        return not any(tasks for replies in busy for tasks in replies.values())

    wait_for(quiet, timeout, interval=0.5, what="the workers to finish their tasks")


@pytest.fixture
def celery_worker(transactional_db, module_celery_worker):
    """A real Celery worker process consuming every queue, on the test database (one a module). The test's
    data is flushed only once the worker has finished what the test gave it."""
    yield module_celery_worker
    worker_quiet()
