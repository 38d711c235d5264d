"""The environment service's cost: steps a second and p50/p95 step latency through the service (its own process,
`manage.py envservice`, over HTTP, every step stored as a Step) against the same MiniWoB env stepped in-process
(no HTTP, nothing stored), for 1 and 4 parallel envs (`LOUPE_BENCH_ENVSERVICE_PARALLEL=1,4,8` for more); and
the time to lease a warm env (idle in the pool, its browser up) and a cold one (a browser started for it).

Each parallel caller plays `LOUPE_BENCH_ENVSERVICE_EPISODES` (default 5) episodes of enter-text (three steps each)
with the scripted solver; only step calls are timed. The service runs on a database of its own
(`loupe_bench_envservice`, made and migrated here). Prints JSON.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("LOUPE_FAST_PASSWORD_HASHER", "1")
os.environ.setdefault("LOUPE_MEDIA_ROOT", tempfile.mkdtemp(prefix="loupe-bench-media-"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from agent.actions import format_turn  # noqa: E402
from agent.envs import make_env  # noqa: E402
from agent.solvers import solve_step  # noqa: E402
from bench.stats import percentile  # noqa: E402
from envservice.client import EnvServiceClient, observation_of  # noqa: E402

TASK = "enter-text"
EPISODES = int(os.environ.get("LOUPE_BENCH_ENVSERVICE_EPISODES", "5"))
PARALLEL = [int(n) for n in os.environ.get("LOUPE_BENCH_ENVSERVICE_PARALLEL", "1,4").split(",")]


def _figures(latencies: list[float], steps: int, wall: float) -> dict:
    return {"steps": steps, "steps_per_s": round(steps / wall, 2), "p50_ms": percentile(latencies, 0.5),
            "p95_ms": percentile(latencies, 0.95)}


def _in_parallel(n: int, play) -> dict:
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        mine = play(i)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _figures(latencies, len(latencies), time.monotonic() - started)


def in_process(i: int) -> list[float]:
    env = make_env("miniwob")
    latencies = []
    try:
        for episode in range(EPISODES):
            obs, history, done = env.reset(TASK, 100 * i + episode), [], False
            while not done:
                turn = solve_step(TASK, obs, history)
                history.append(turn)
                started = time.monotonic()
                result = env.step(turn.action)
                latencies.append(time.monotonic() - started)
                obs, done = result.observation, result.done
    finally:
        env.close()
    return latencies


def through_service(client: EnvServiceClient, project_id: int):
    def play(i: int) -> list[float]:
        latencies = []
        lease = client.lease(project=project_id, task=TASK, seed=100 * i)
        try:
            for episode in range(EPISODES):
                if episode:
                    lease = {**lease, **client.reset(lease["lease"], seed=100 * i + episode)}
                obs, history, done = observation_of(lease["observation"]), [], False
                while not done:
                    turn = solve_step(TASK, obs, history)
                    history.append(turn)
                    started = time.monotonic()
                    step = client.step(lease["lease"], format_turn(turn.thought, turn.action))
                    latencies.append(time.monotonic() - started)
                    obs, done = observation_of(step["observation"]), step["done"]
        finally:
            client.release(lease["lease"])
        return latencies
    return play


def _database_url(name: str) -> str:
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, client: EnvServiceClient) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the service exited: {proc.stderr.read()[-2000:]}")
        try:
            urllib.request.urlopen(f"{url}/openapi.json", timeout=5).read()
            if client.status()["pools"][0]["idle"] >= 1:  # its warm env is up
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the service did not become ready in 120 s")


def main() -> None:
    from projects import services
    from projects.models import Role
    from tests.factories import make_member, make_user
    from webapp.auth import token_create

    settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = "loupe_bench_envservice"
    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    project = services.project_create(name="Bench envservice")
    services.task_create(project=project, actor=None, task_name=TASK, max_steps=8)
    user = make_user("bench-rl")
    make_member(project, user, Role.MANAGER)
    token = token_create(user=user)[1]
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DATABASE_URL": _database_url(name)}
    proc = subprocess.Popen([sys.executable, "manage.py", "envservice", "--port", str(port), "--pools",
                             f"miniwob=1:{max(PARALLEL) + 1}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    client = EnvServiceClient(url, token)
    report: dict = {"task": TASK, "episodes_per_caller": EPISODES, "cpus": os.cpu_count()}
    try:
        _wait_ready(url, proc, client)
        leases = {}
        for kind in ("warm", "cold"):  # the pool holds one warm env: the first lease takes it, the second waits
            started = time.monotonic()
            lease = client.lease(project=project.pk, task=TASK, seed=0)
            leases[kind] = {"lease_s": round(time.monotonic() - started, 3), "warm": lease["warm"],
                            "server_s": round(lease["lease_seconds"], 3)}
            lease["_id"] = lease["lease"]
            leases[kind]["_id"] = lease["lease"]
        for figures in leases.values():
            client.release(figures.pop("_id"))
        report["lease"] = leases
        for n in PARALLEL:
            report[f"parallel_{n}"] = {"in_process": _in_parallel(n, in_process),
                                       "service": _in_parallel(n, through_service(client, project.pk))}
            ratio = report[f"parallel_{n}"]["service"]["p95_ms"] / report[f"parallel_{n}"]["in_process"]["p95_ms"]
            report[f"parallel_{n}"]["p95_ratio"] = round(ratio, 2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        connection.creation.destroy_test_db(name, verbosity=0)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
