"""Fan-out latency: 20 live episodes x 5 watchers on one daphne, events at the rate live episodes
produce, measured from the moment a step event is stored to each watcher's socket receiving it (`fanout_*`,
which includes the database write), and from its commit (`from_commit_*`: publish, channel layer, consumer,
socket: the part that compares with the bare layer); beside the bare channel layer in the same run, twice: one
message sent and received at a time (`bare_layer`), and the same fan-out as the sockets get, 20 groups of 5
channels in one event loop with each tick's 20 group sends at once (`bare_layer_fanout`: what the layer costs for
this shape before any of Loupe's code runs). The sockets are read by LOUPE_BENCH_LOAD_CLIENTS client processes (4,
bench/ws_clients.py), so that the client's own queueing stays out of the figures. Prints JSON."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.django_setup import setup_django  # noqa: E402

setup_django(channel_prefix=f"bench{os.getpid()}")  # settings, and the database migrated

from bench.stats import percentile  # noqa: E402
from bench.ws_clients import Clients, free_port, wait_listening  # noqa: E402

from asgiref.sync import async_to_sync  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import transaction  # noqa: E402

EPISODES, WATCHERS, STEPS, STEP_INTERVAL = 20, 5, 15, 0.5  # ~40 events/s in all
CLIENTS = int(os.environ.get("LOUPE_BENCH_LOAD_CLIENTS", "4"))  # client processes


def _summary(samples: list[float]) -> dict:
    return {"p50_ms": percentile(samples, .5), "p95_ms": percentile(samples, .95), "p99_ms": percentile(samples, .99)}


def bare_layer_latency(n: int = 200) -> dict:
    """One message at a time: send to a channel, receive it, again."""
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

    return _summary(async_to_sync(run)())


def bare_layer_fanout() -> dict:
    """The sockets' shape on the bare layer: EPISODES groups of WATCHERS channels in one loop (as in one daphne),
    each tick's EPISODES group sends at once, every STEP_INTERVAL, for STEPS ticks; send -> each receive."""
    layer = get_channel_layer()

    async def run():
        groups = [f"bench-fanout-{os.getpid()}-{n}" for n in range(EPISODES)]
        channels = []
        for group in groups:
            for _ in range(WATCHERS):
                channel = await layer.new_channel()
                await layer.group_add(group, channel)
                channels.append(channel)
        out: list[float] = []

        async def receive(channel: str) -> None:
            for _ in range(STEPS):
                message = await layer.receive(channel)
                out.append(time.time() - message["t"])

        receivers = [asyncio.ensure_future(receive(channel)) for channel in channels]
        await asyncio.sleep(0.5)  # the subscriptions are in place
        for _ in range(STEPS):
            started = time.monotonic()
            for group in groups:
                await layer.group_send(group, {"type": "x", "t": time.time()})
            await asyncio.sleep(max(0.0, STEP_INTERVAL - (time.monotonic() - started)))
        await asyncio.wait_for(asyncio.gather(*receivers), 30)
        return out

    samples = async_to_sync(run)()
    return {**_summary(samples), "deliveries": len(samples), "expected_deliveries": EPISODES * WATCHERS * STEPS}


def main() -> None:
    from rollouts.events import event_append
    from rollouts.models import Episode
    from projects.models import Membership, Project, TaskSpec
    from webapp.auth import token_create

    User = get_user_model()
    user, _ = User.objects.get_or_create(username="bench-watcher")
    project, _ = Project.objects.get_or_create(slug="bench-fanout", defaults={"name": "Bench fan-out"})
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": "annotator"})
    task, _ = TaskSpec.objects.get_or_create(project=project, task_name="click-button", split="train")
    episodes = [Episode.objects.create(project=project, task=task, seed=i) for i in range(EPISODES)]
    _, token = token_create(user=user, name="bench")

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "webapp.asgi:application"], cwd=ROOT, env=dict(os.environ),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    committed_at: dict[tuple[int, int], float] = {}
    try:
        wait_listening(port)
        shares = [[] for _ in range(CLIENTS)]
        for number, (episode, _) in enumerate((e, w) for e in episodes for w in range(WATCHERS)):
            shares[number % CLIENTS].append((episode.pk, token, False, 0.0))
        clients = Clients([(port, share) for share in shares])
        clients.go()
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
        time.sleep(3)  # the last events arrive
        measured = clients.finish()
        latencies = [latency for _, latency in measured["event"]]
        received, errors = measured["received"], measured["errors"]
        bare = bare_layer_latency()
        bare_fanout = bare_layer_fanout()
    finally:
        server.terminate()
        server.wait(timeout=10)
        Episode.objects.filter(pk__in=[e.pk for e in episodes]).delete()
    expected = EPISODES * WATCHERS * STEPS
    from_commit = [at - committed_at[(episode_id, seq)] for episode_id, seq, at in received]
    print(json.dumps({
        "episodes": EPISODES, "watchers_per_episode": WATCHERS, "events_per_second": round(EPISODES / STEP_INTERVAL, 1),
        "client_processes": len(clients.processes), "deliveries": len(latencies), "expected_deliveries": expected,
        "errors": errors,
        "fanout_p50_ms": percentile(latencies, .5), "fanout_p95_ms": percentile(latencies, .95),
        "fanout_p99_ms": percentile(latencies, .99),
        "from_commit_p50_ms": percentile(from_commit, .5), "from_commit_p95_ms": percentile(from_commit, .95),
        "from_commit_p99_ms": percentile(from_commit, .99), "bare_layer": bare, "bare_layer_fanout": bare_fanout,
        "from_commit_p95_over_bare_layer_fanout_p95": round(percentile(from_commit, .95) / bare_fanout["p95_ms"], 2),
        "from_commit_p95_over_bare_layer_p95": round(percentile(from_commit, .95) / bare["p95_ms"], 2),
        "target": "fan-out p95 < 50 ms; from commit, p95 within 3x the bare layer's",
    }))


if __name__ == "__main__":
    main()
