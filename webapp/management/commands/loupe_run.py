"""`make run`: migrate, seed the demo, then start daphne, the Celery workers and beat; Ctrl-C stops all.

The terminal shows what a person needs (progress, the ready message, warnings and errors); each process's
full output (daphne's access log, Celery's banners and task logs) goes to a file in LOUPE_LOG_DIR.

Everything Loupe writes is its user's alone (umask 077; the data folder closed: ``protect``), and where the
environments' sandboxes cannot be made here, it says so once, with the reason (``sandbox_notice``)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from agent.envs import sandbox
from training.bootstrap import ensure_default_deployment
from webapp import embedded
from webapp.demo import DEMO_USERS, demo_password, seed_demo


def process_commands(*, python: str, host: str, port: int, log_dir: Path, beat_schedule: Path,
                     rollout_concurrency: str = "3", live_concurrency: str = "2",
                     worker_log_level: str = "WARNING", policy_port: int | None = None,
                     policy_threads: int = 1) -> dict[str, list[str]]:
    """The argv of every process `make run` starts. Daphne writes its access log (a line a request) to
    access.log, not the terminal; the workers' and beat's banners go to their stdout, which run() sends to
    their log files.

    One worker a queue, so people never wait behind machines: supervised episodes (`live`) and think-aloud
    transcription (`audio`) have workers of their own that a batch of autonomous rollouts (`rollouts`) or a
    snapshot build (`default`) cannot fill. With ``policy_port``, the host's policy server (`policy`), which the
    rollout and live workers ask instead of each loading the model (LOUPE_POLICY_SERVER_URL)."""
    celery = [python, "-m", "celery", "-A", "webapp"]

    def worker(queue: str, concurrency: str) -> list[str]:
        return [*celery, "worker", "-Q", queue, "-n", f"{queue}@%h", "-c", concurrency, "-O", "fair",
                "--loglevel", worker_log_level]

    policy = {"policy": [python, "-m", "trainer", "serve", "--host", "127.0.0.1", "--port", str(policy_port),
                         "--threads", str(policy_threads)]} if policy_port else {}
    return {
        **policy,
        "web": [python, "-m", "daphne", "-b", host, "-p", str(port), "--proxy-headers",
                "--access-log", str(log_dir / "access.log"), "webapp.asgi:application"],
        "live": worker("live", live_concurrency),
        "audio": worker("audio", "1"),
        "rollouts": worker("rollouts", rollout_concurrency),
        "jobs": worker("default", "1"),
        "train": worker("train", "1"),
        "beat": [*celery, "beat", "--loglevel", "WARNING", "-s", str(beat_schedule)],
    }


def protect(data_dir: Path) -> None:
    """Files made from now on (media, logs, checkpoints; by this process and every one it starts) are Loupe's user's
    alone, and what an earlier run left in the data folder is closed to others too."""
    embedded.private_files()
    embedded.protect_data_dir(data_dir)


def sandbox_notice() -> str:
    """A line for the terminal when the environments' sandboxes are missing something here ("" when not)."""
    found = sandbox.support()
    if not found.namespaces:
        return (f"No sandbox can be made here, so desktop and terminal tasks are refused (their episodes fail with "
                f"this reason), and browsers run unconfined: {found.reason}.")
    if not found.cgroups:
        return f"Sandboxes are limited by rlimits only (no cgroup limits): {found.reason}."
    return ""


def log_dir() -> Path:
    return Path(os.environ.get("LOUPE_LOG_DIR") or settings.DATA_DIR / "logs")


# Django logs every 4xx answer as a django.request WARNING ("Unauthorized: /api/v1/auth/session"): a line a
# request, like the access log, so it stays in web.log and off the terminal (5xx are ERRORs and show).
LOG_ONLY = (b" WARNING django.request: ",)


def relay(name: str, stream: IO[bytes], log: IO[bytes], terminal: IO[bytes]) -> None:
    """Copy a process's stderr (its warnings and errors) to its log file and, marked with its name, to the
    terminal, line by line until the process closes it."""
    for line in iter(stream.readline, b""):
        log.write(line)
        log.flush()
        if not any(marker in line for marker in LOG_ONLY):
            terminal.write(f"[{name}] ".encode() + line)
            terminal.flush()
    stream.close()


class Command(BaseCommand):
    help = "Start the whole application: daphne (HTTP + WebSocket), Celery workers per queue group, Celery beat."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args, host: str, port: int, **options):
        started = time.monotonic()
        protect(settings.DATA_DIR)
        self.stdout.write("Preparing the database (migrations, demo project)…")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)  # the admin's styles and scripts
        password, generated = demo_password()
        seed_demo(password)
        ensure_default_deployment(log=self.stdout.write)  # trains/registers the tiny v0 when missing

        if os.geteuid() == 0:
            self.stdout.write("Running as root: the workers run as root too (each environment's sandbox then runs "
                              "under a uid of its own). Fine on a development machine; in production run Loupe as an "
                              "unprivileged user, and the rollout workers as root in their container (the Docker "
                              "images do).")
        if notice := sandbox_notice():
            self.stderr.write(notice)
        env = dict(os.environ)  # DATABASE_URL / REDIS_URL are set by now (embedded or given)
        # one policy server a host, unless one is given (LOUPE_POLICY_SERVER_URL) or none wanted (LOUPE_POLICY_SERVER=0)
        policy_port = None
        if not env.get("LOUPE_POLICY_SERVER_URL") and env.get("LOUPE_POLICY_SERVER", "1") != "0":
            policy_port = int(env.get("LOUPE_POLICY_SERVER_PORT", "8101"))
            env["LOUPE_POLICY_SERVER_URL"] = f"http://127.0.0.1:{policy_port}/v1"
        logs = log_dir()
        logs.mkdir(parents=True, exist_ok=True)
        commands = process_commands(
            python=sys.executable, host=host, port=port, log_dir=logs,
            beat_schedule=settings.DATA_DIR / "celerybeat-schedule",
            rollout_concurrency=os.environ.get("LOUPE_ROLLOUT_CONCURRENCY", "3"),
            live_concurrency=os.environ.get("LOUPE_LIVE_CONCURRENCY", "2"),
            worker_log_level=os.environ.get("LOUPE_WORKER_LOG_LEVEL", "WARNING"), policy_port=policy_port,
            policy_threads=settings.LOUPE_POLICY_THREADS)
        processes: dict[str, subprocess.Popen] = {}
        log_files: list[IO[bytes]] = []
        relays: list[threading.Thread] = []
        stopping = False

        def stop(*_):
            nonlocal stopping
            if stopping:
                return
            stopping = True
            self.stdout.write("\nStopping Loupe…")
            for proc in processes.values():
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            for proc in processes.values():
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            if not os.environ.get("LOUPE_KEEP_EMBEDDED"):
                if embedded.started_here():
                    embedded.redis_stop()
                    embedded.postgres_stop()
            for thread in relays:
                thread.join(timeout=2)  # the processes have exited: their last lines are on their way
            for log in log_files:
                log.close()
            self.stdout.write("Stopped.")

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(f"Starting the web server, the workers and beat (their logs: {logs}/)…")
        for name, argv in commands.items():
            log = open(logs / f"{name}.log", "ab")
            log_files.append(log)
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} make run: {' '.join(argv)}\n".encode())
            log.flush()
            processes[name] = subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=subprocess.PIPE)
            relays.append(threading.Thread(target=relay, args=(name, processes[name].stderr, log, sys.stderr.buffer),
                                           name=f"relay-{name}", daemon=True))
            relays[-1].start()

        url = f"http://{host}:{port}/"
        if self._wait_ready(url, processes):
            note = " (generated; set LOUPE_DEMO_PASSWORD to choose it)" if generated else ""
            self.stdout.write(self.style.SUCCESS(
                f"\nLoupe is ready at {url}  (in {time.monotonic() - started:.1f} s)\n"
                f"Demo logins: {', '.join(DEMO_USERS)} / password: {password}{note}\n"
                f"Health: {url}api/v1/health   Admin: {url}admin/\n"
                f"Logs: {logs}/ ({', '.join(f'{name}.log' for name in processes)}, access.log: every request); "
                f"warnings and errors show here too.\nPress Ctrl-C to stop.\n"))
        while not stopping:
            for name, proc in processes.items():
                if proc.poll() is not None and not stopping:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping everything "
                                      f"(its output: {logs / f'{name}.log'}).")
                    stop()
                    sys.exit(1)
            time.sleep(0.5)

    def _wait_ready(self, url: str, processes) -> bool:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in processes.values()):
                return False
            try:
                with urllib.request.urlopen(url + "api/v1/health", timeout=3) as response:
                    if response.status == 200:
                        return True
            except OSError:
                pass
            time.sleep(0.3)
        self.stderr.write(f"Loupe did not become healthy within 60 s; see {url}api/v1/health")
        return True
