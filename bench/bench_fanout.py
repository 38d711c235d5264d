"""Fan-out latency: 20 live episodes x 5 watchers on one daphne, events at the rate live episodes
produce, measured from the moment a step event is stored to each watcher's socket receiving it (`fanout_*`,
which includes the database write), and from its commit (`from_commit_*`: publish, channel layer, consumer,
socket: the part that compares with the bare layer); beside the bare channel layer's latency (send -> receive)
in the same run. Prints JSON."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.django_setup import setup_django  # noqa: E402

setup_django(channel_prefix=f"bench{os.getpid()}")  # settings, and the database migrated

from bench.stats import percentile  # noqa: E402

from asgiref.sync import async_to_sync  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402

EPISODES, WATCHERS, STEPS, STEP_INTERVAL = 20, 5, 15, 0.5  # ~40 events/s in all


def bare_layer_latency(n: int = 200) -> dict:
    layer = get_channel_layer()

    async def run():
        channel = await layer.new_channel()
        out = []
        for _ in range(n):
            sent = time.perf_counter()
            await layer.send(channel, {"type": "x"})
            await layer.receive(channel)
            out.append(time.perf_counter() - sent)
        return out

    samples = async_to_sync(run)()
    return {"p50_ms": percentile(samples, .5), "p95_ms": percentile(samples, .95), "p99_ms": percentile(samples, .99)}


def main() -> None:
    import socket

    import websocket

    from flywheel.events import event_append
    from flywheel.models import Episode, Membership, Project, TaskSpec
    from webapp.auth import token_create

    User = get_user_model()
    user, _ = User.objects.get_or_create(username="bench-watcher")
    project, _ = Project.objects.get_or_create(slug="bench-fanout", defaults={"name": "Bench fan-out"})
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "annotator"})
    task, _ = TaskSpec.objects.get_or_create(project=project, task_name="click-button", split="train")
    episodes = [Episode.objects.create(project=project, task=task, seed=i) for i in range(EPISODES)]
    _, token = token_create(user=user, name="bench")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "webapp.asgi:application"], cwd=ROOT, env=dict(os.environ),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    latencies: list[float] = []
    received: list[tuple[int, int, float]] = []  # (episode, seq, received at)
    committed_at: dict[tuple[int, int], float] = {}
    errors: list[str] = []
    lock = threading.Lock()
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        sockets = []
        for episode in episodes:
            for _ in range(WATCHERS):
                ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws/episodes/{episode.pk}/",
                                                 header=[f"Authorization: Bearer {token}"], suppress_origin=True,
                                                 timeout=30)
                sockets.append((ws, episode.pk))

        def watch(ws, episode_id: int):
            got = 0
            while got < STEPS:
                try:
                    message = json.loads(ws.recv())
                except Exception as exc:  # noqa: BLE001 - counted as an error in the report
                    with lock:
                        errors.append(type(exc).__name__)
                    return
                if message.get("type") == "step.executed":
                    now = time.time()
                    with lock:
                        latencies.append(now - message["data"]["t"])
                        received.append((episode_id, message["seq"], now))
                    got += 1

        threads = [threading.Thread(target=watch, args=(ws, episode_id), daemon=True) for ws, episode_id in sockets]
        for t in threads:
            t.start()
        time.sleep(1.0)
        for step in range(STEPS):
            started = time.monotonic()
            for episode in episodes:
                commit: dict[str, float] = {}
                with transaction.atomic():
                    # on_commit hooks run in order: this stamp, then event_append's publish
                    transaction.on_commit(lambda: commit.setdefault("at", time.time()))
                    event = event_append(episode_id=episode.pk, type="step.executed",
                                         payload={"index": step, "t": time.time()})
                committed_at[(episode.pk, event.seq)] = commit["at"]
            time.sleep(max(0.0, STEP_INTERVAL - (time.monotonic() - started)))
        for t in threads:
            t.join(timeout=30)
        for ws, _ in sockets:
            ws.close()
        bare = bare_layer_latency()
    finally:
        server.terminate()
        server.wait(timeout=10)
        Episode.objects.filter(pk__in=[e.pk for e in episodes]).delete()
    expected = EPISODES * WATCHERS * STEPS
    from_commit = [at - committed_at[(episode_id, seq)] for episode_id, seq, at in received]
    print(json.dumps({
        "episodes": EPISODES, "watchers_per_episode": WATCHERS, "events_per_second": round(EPISODES / STEP_INTERVAL, 1),
        "deliveries": len(latencies), "expected_deliveries": expected, "errors": len(errors),
        "fanout_p50_ms": percentile(latencies, .5), "fanout_p95_ms": percentile(latencies, .95),
        "fanout_p99_ms": percentile(latencies, .99),
        "from_commit_p50_ms": percentile(from_commit, .5), "from_commit_p95_ms": percentile(from_commit, .95),
        "from_commit_p99_ms": percentile(from_commit, .99), "bare_layer": bare,
        "target": "fan-out p95 < 50 ms; from commit, p95 within 3x the bare layer's",
    }))


if __name__ == "__main__":
    main()
