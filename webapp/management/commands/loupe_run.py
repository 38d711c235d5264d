"""`make run`: migrate, seed the demo, then start daphne, the Celery workers and beat; Ctrl-C stops all."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from webapp.demo import DEMO_USERS, demo_password, seed_demo


class Command(BaseCommand):
    help = "Start the whole application: daphne (HTTP + WebSocket), Celery workers per queue group, Celery beat."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))

    def handle(self, *args, host: str, port: int, **options):
        started = time.monotonic()
        call_command("migrate", interactive=False, verbosity=0)
        password, generated = demo_password()
        seed_demo(password)
        from flywheel.bootstrap import ensure_default_deployment  # trains/registers the tiny v0 when missing

        ensure_default_deployment(log=self.stdout.write)

        python = sys.executable
        env = dict(os.environ)  # DATABASE_URL / REDIS_URL are set by now (embedded or given)
        rollout_concurrency = os.environ.get("LOUPE_ROLLOUT_CONCURRENCY", "3")
        worker_log = os.environ.get("LOUPE_WORKER_LOG_LEVEL", "WARNING")
        commands = {
            "web": [python, "-m", "daphne", "-b", host, "-p", str(port), "--proxy-headers", "webapp.asgi:application"],
            "worker": [python, "-m", "celery", "-A", "webapp", "worker", "-Q", "rollouts,audio,default", "-n", "live@%h",
                       "-c", rollout_concurrency, "-O", "fair", "--loglevel", worker_log],
            "train": [python, "-m", "celery", "-A", "webapp", "worker", "-Q", "train", "-n", "train@%h", "-c", "1",
                      "--loglevel", worker_log],
            "beat": [python, "-m", "celery", "-A", "webapp", "beat", "--loglevel", "WARNING",
                     "-s", str(settings.DATA_DIR / "celerybeat-schedule")],
        }
        processes: dict[str, subprocess.Popen] = {}
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
                from webapp import embedded

                if embedded.started_here():
                    embedded.redis_stop()
                    embedded.postgres_stop()
            self.stdout.write("Stopped.")

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        for name, argv in commands.items():
            processes[name] = subprocess.Popen(argv, env=env, start_new_session=True)

        url = f"http://{host}:{port}/"
        if self._wait_ready(url, processes):
            note = " (generated; set LOUPE_DEMO_PASSWORD to choose it)" if generated else ""
            self.stdout.write(self.style.SUCCESS(
                f"\nLoupe is ready at {url}  (in {time.monotonic() - started:.1f} s)\n"
                f"Demo logins: {', '.join(DEMO_USERS)} / password: {password}{note}\n"
                f"Health: {url}api/v1/health   Admin: {url}admin/   Press Ctrl-C to stop.\n"))
        while not stopping:
            for name, proc in processes.items():
                if proc.poll() is not None and not stopping:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping everything.")
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
