"""Load: 100 annotator sockets on one daphne (20 live episodes x 5 people), step events at the rate 20 live
episodes produce (2 a second each, stored as the rollout workers store them), and each episode's controller
sending a command every two seconds (stored, NOTIFYed, acknowledged). Measures event latency (stored ->
received) and command latency (sent -> ack) p50/p95/p99, errors, and daphne's memory and CPU over the run; apart,
the events of sockets that only watch (`watcher_event_*`), the writer's store-and-publish time (`append_*`) and the
commands after each controller's first (`later_ack_*`: the first also makes its sender the controller, two events
more). Every socket checks that it sees no event twice.
Prints JSON; also writes bench/results/load-memory.svg (daphne's memory) and bench/results/load-latency.svg (event
and command latency p95 per second of the run, the same series in the JSON's `timeline`). Unlike bench_fanout, the
sockets also write. LOUPE_BENCH_LOAD_EPISODES scales it (5 sockets an episode), LOUPE_BENCH_LOAD_SECONDS its length."""
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

EPISODES, PEOPLE = int(os.environ.get("LOUPE_BENCH_LOAD_EPISODES", "20")), 5
SECONDS = float(os.environ.get("LOUPE_BENCH_LOAD_SECONDS", "30"))
STEP_INTERVAL, COMMAND_INTERVAL = 0.5, 2.0


def per_second(samples: list[tuple[float, float]], started: float) -> list[tuple[float, float]]:
    """(second of the run, p95 in ms of the latencies received in that second), for the chart and the JSON."""
    seconds: dict[int, list[float]] = {}
    for at, latency in samples:
        seconds.setdefault(int(at - started), []).append(latency)
    return [(second, percentile(values, .95)) for second, values in sorted(seconds.items())]


def main() -> None:
    import socket

    import psutil
    import websocket
    from django.contrib.auth import get_user_model

    from bench.chart import line_chart_svg
    from flywheel.events import event_append
    from flywheel.models import Episode, Membership, Project, TaskSpec
    from webapp.auth import token_create

    User = get_user_model()
    project, _ = Project.objects.get_or_create(slug="bench-load", defaults={"name": "Bench load"})
    task, _ = TaskSpec.objects.get_or_create(project=project, task_name="click-button", split="train")
    tokens = []
    for n in range(PEOPLE):
        user, _ = User.objects.get_or_create(username=f"bench-load-{n}")
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": "annotator"})
        tokens.append(token_create(user=user, name="bench")[1])
    episodes = [Episode.objects.create(project=project, task=task, seed=i, mode="supervised", status="running")
                for i in range(EPISODES)]

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                               "webapp.asgi:application"], cwd=ROOT, env=dict(os.environ),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    daphne = psutil.Process(server.pid)
    event_latency: list[tuple[float, float]] = []  # (received at, latency), both in seconds
    ack_latency: list[tuple[float, float]] = []
    append_latency: list[float] = []
    later_ack_latency: list[float] = []  # all but each controller's first command, which also makes them controller
    watcher_latency: list[float] = []  # events to the sockets that only watch (the controller's also wait on its commands)
    errors: dict[str, int] = {}
    memory: list[tuple[float, float]] = []
    lock = threading.Lock()
    stop = threading.Event()
    sent_at: dict[str, float] = {}

    def error(kind: str):
        with lock:
            errors[kind] = errors.get(kind, 0) + 1

    try:
        for _ in range(150):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.2)
        sockets = []  # (ws, episode, is the controller)
        for episode in episodes:
            for n in range(PEOPLE):
                ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws/episodes/{episode.pk}/",
                                                 header=[f"Authorization: Bearer {tokens[n]}"], suppress_origin=True,
                                                 timeout=30)
                sockets.append((ws, episode, n == 0))

        def read(ws, controller: bool):
            seen: set[int] = set()
            while not stop.is_set():
                try:
                    message = json.loads(ws.recv())
                except websocket.WebSocketTimeoutException:
                    continue
                except Exception as exc:  # noqa: BLE001 - counted in the report
                    if not stop.is_set():
                        error(f"socket {type(exc).__name__}")
                    return
                now = time.time()
                if message.get("type") == "step.executed":
                    if message["seq"] in seen:
                        error("duplicate event")
                    seen.add(message["seq"])
                    with lock:
                        event_latency.append((now, now - message["data"]["t"]))
                        if not controller:
                            watcher_latency.append(now - message["data"]["t"])
                elif message.get("type") in ("ack", "error") and message.get("id") in sent_at:
                    with lock:
                        latency = now - sent_at.pop(message["id"])
                        ack_latency.append((now, latency))
                        if not message["id"].endswith("-1"):
                            later_ack_latency.append(latency)
                    if message["type"] == "error":
                        error("command refused")

        def command(ws, episode):
            n = 0
            while not stop.wait(COMMAND_INTERVAL):
                n += 1
                command_id = f"load-{episode.pk}-{n}"
                sent_at[command_id] = time.time()
                try:
                    ws.send(json.dumps({"type": "pause", "id": command_id}))
                except Exception as exc:  # noqa: BLE001
                    error(f"send {type(exc).__name__}")
                    return

        threads = []
        for ws, episode, controller in sockets:
            ws.settimeout(1)
            threads.append(threading.Thread(target=read, args=(ws, controller), daemon=True))
            if controller:
                threads.append(threading.Thread(target=command, args=(ws, episode), daemon=True))
        for t in threads:
            t.start()
        cpu_before = sum(daphne.cpu_times()[:2])
        started, started_wall = time.monotonic(), time.time()
        steps = 0
        while time.monotonic() - started < SECONDS:
            tick = time.monotonic()
            for episode in episodes:
                t = time.time()
                event_append(episode_id=episode.pk, type="step.executed", payload={"index": steps, "t": t})
                append_latency.append(time.time() - t)  # stored, committed and published, on the writer's side
            steps += 1
            memory.append((time.monotonic() - started, daphne.memory_info().rss / 2**20))
            time.sleep(max(0.0, STEP_INTERVAL - (time.monotonic() - tick)))
        time.sleep(3)  # the last events and acks arrive
        cpu = sum(daphne.cpu_times()[:2]) - cpu_before
        stop.set()
        for ws, _, _ in sockets:
            ws.close()
        for t in threads:
            t.join(timeout=5)
    finally:
        server.terminate()
        server.wait(timeout=10)
        Episode.objects.filter(pk__in=[e.pk for e in episodes]).delete()
    expected = steps * EPISODES * PEOPLE
    timeline = {"event_p95_ms": per_second(event_latency, started_wall), "ack_p95_ms": per_second(ack_latency, started_wall)}
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    load = f"Load: {EPISODES * PEOPLE} sockets, {EPISODES / STEP_INTERVAL:.0f} events/s"
    (out / "load-memory.svg").write_text(line_chart_svg(
        {"daphne": memory}, title=f"{load} — daphne memory", x_label="seconds", y_label="resident MB"))
    (out / "load-latency.svg").write_text(line_chart_svg(
        {"event p95": timeline["event_p95_ms"], "command ack p95": timeline["ack_p95_ms"]},
        title=f"{load}, {EPISODES / COMMAND_INTERVAL:.0f} commands/s — latency p95 per second", x_label="seconds",
        y_label="ms", bands={"goal 50 ms": 50.0}))
    event_latency = [latency for _, latency in event_latency]
    ack_latency = [latency for _, latency in ack_latency]
    print(json.dumps({
        "sockets": EPISODES * PEOPLE, "duration_s": SECONDS, "events_per_second": round(EPISODES / STEP_INTERVAL, 1),
        "commands_per_second": round(EPISODES / COMMAND_INTERVAL, 1),
        "deliveries": len(event_latency), "expected_deliveries": expected, "lost_deliveries": expected - len(event_latency),
        "event_p50_ms": percentile(event_latency, .5), "event_p95_ms": percentile(event_latency, .95),
        "event_p99_ms": percentile(event_latency, .99),
        "watcher_event_p95_ms": percentile(watcher_latency, .95), "watcher_event_p99_ms": percentile(watcher_latency, .99),
        "append_p50_ms": percentile(append_latency, .5), "append_p95_ms": percentile(append_latency, .95),
        "acks": len(ack_latency), "ack_p50_ms": percentile(ack_latency, .5), "ack_p95_ms": percentile(ack_latency, .95),
        "ack_p99_ms": percentile(ack_latency, .99),
        "later_ack_p50_ms": percentile(later_ack_latency, .5), "later_ack_p95_ms": percentile(later_ack_latency, .95),
        "later_ack_p99_ms": percentile(later_ack_latency, .99), "unanswered_commands": len(sent_at), "errors": errors,
        "daphne_rss_mb": {"start": round(memory[0][1], 1), "end": round(memory[-1][1], 1)} if memory else None,
        "daphne_cpu_share": round(cpu / SECONDS, 2),
        "timeline": timeline,
        "target": "event p95 < 50 ms and p99 < 100 ms, command ack p95 < 50 ms, no lost delivery, no error",
    }))


if __name__ == "__main__":
    main()
