"""Load: 100 annotator sockets on one daphne (20 live episodes x 5 people), step events at the rate 20 live
episodes produce (2 a second each, stored as the rollout workers store them), and each episode's controller
sending a command every two seconds (stored, NOTIFYed, acknowledged). Each episode steps, and each controller
commands, at its own moment of the interval, as 20 rollouts and 20 people do; LOUPE_BENCH_LOAD_BURST=1 makes every
event of a tick and every command arrive in the same millisecond instead (the worst case). Measures event latency
(stored -> received) and command latency (sent -> ack) p50/p95/p99, errors, and daphne's memory and CPU over the
run; apart, the events of sockets that only watch (`watcher_event_*`), the writer's store-and-publish time
(`append_*`) and the commands after each controller's first (`later_ack_*`: the first also makes its sender the
controller, two events more). Every socket checks that it sees no event twice. The sockets are read by
LOUPE_BENCH_LOAD_CLIENTS processes (4), so that the client's own queueing stays out of the figures.
Prints JSON; also writes bench/results/load-memory.svg (daphne's memory) and bench/results/load-latency.svg (event
and command latency p95 per second of the run, the same series in the JSON's `timeline`). Unlike bench_fanout, the
sockets also write. LOUPE_BENCH_LOAD_EPISODES scales it (5 sockets an episode), LOUPE_BENCH_LOAD_SECONDS its length;
LOUPE_BENCH_LOAD_DAPHNES=2 serves the sockets from two daphne processes behind the one Redis and PostgreSQL (the shape
of several hosts), each episode's people spread over them (`daphne_cpu_share` and `daphne_rss_mb` are per daphne).
LOUPE_BENCH_LOAD_SERVERS=daphne,uvicorn,daphne,uvicorn measures each ASGI server in turn in one run, in the same
minutes of the machine (uvicorn with `websockets`, installed apart: it is not a requirement), and prints `runs`, one
report a server run, and `servers`, each server's figures over its runs."""
from __future__ import annotations

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

EPISODES, PEOPLE = int(os.environ.get("LOUPE_BENCH_LOAD_EPISODES", "20")), 5
SECONDS = float(os.environ.get("LOUPE_BENCH_LOAD_SECONDS", "30"))
STEP_INTERVAL, COMMAND_INTERVAL = 0.5, 2.0
CLIENTS = int(os.environ.get("LOUPE_BENCH_LOAD_CLIENTS", "4"))  # client processes
# daphne processes behind one Redis and one PostgreSQL (the shape of several hosts): each episode's people are spread
# over them, so that its watchers sit on other daphnes than its controller
DAPHNES = int(os.environ.get("LOUPE_BENCH_LOAD_DAPHNES", "1"))
BURST = os.environ.get("LOUPE_BENCH_LOAD_BURST", "") not in ("", "0")
SERVERS = [name.strip() for name in os.environ.get("LOUPE_BENCH_LOAD_SERVERS", "daphne").split(",") if name.strip()]


def server_command(server: str, port: int) -> list[str]:
    """The command that serves webapp.asgi on `port`: daphne (what `make run` and the tests start) or uvicorn."""
    if server == "daphne":
        return [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"]
    if server == "uvicorn":
        return [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(port), "--ws", "websockets",
                "--log-level", "warning", "webapp.asgi:application"]
    raise SystemExit(f"LOUPE_BENCH_LOAD_SERVERS: unknown server {server!r}; use daphne or uvicorn.")


def per_second(samples: list[tuple[float, float]], started: float) -> list[tuple[float, float]]:
    """(second of the run, p95 in ms of the latencies received in that second), for the chart and the JSON."""
    seconds: dict[int, list[float]] = {}
    for at, latency in samples:
        seconds.setdefault(int(at - started), []).append(latency)
    return [(second, percentile(values, .95)) for second, values in sorted(seconds.items())]


def phase(index: int, count: int) -> float:
    """Where in each interval episode `index` of `count` acts, as a share of the interval: spread evenly, as 20
    rollouts and 20 people do, or all at once with LOUPE_BENCH_LOAD_BURST=1 (every event of a tick and every
    command in the same millisecond: the worst case, not a load people make)."""
    return 0.0 if BURST else index / count


def main() -> None:
    from django.contrib.auth import get_user_model

    from projects.models import Membership, Project, TaskSpec
    from webapp.auth import token_create

    for server in SERVERS:
        server_command(server, 0)  # an unknown name stops the bench before anything starts
    User = get_user_model()
    project, _ = Project.objects.get_or_create(slug="bench-load", defaults={"name": "Bench load"})
    task, _ = TaskSpec.objects.get_or_create(project=project, task_name="click-button", split="train")
    tokens = []
    for n in range(PEOPLE):
        user, _ = User.objects.get_or_create(username=f"bench-load-{n}")
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": "annotator"})
        tokens.append(token_create(user=user, name="bench")[1])
    if len(SERVERS) == 1:
        print(json.dumps(measure(SERVERS[0], project, task, tokens)))
        return
    runs = []
    for n, server in enumerate(SERVERS):
        runs.append(measure(server, project, task, tokens, chart_suffix=f"-{n + 1}-{server}"))
        print(server, {key: value for key, value in runs[-1].items() if key.endswith("p95_ms")}, file=sys.stderr)
    summary = {server: {key: [run[key] for run in runs if run["server"] == server] for key in (
        "ack_p50_ms", "ack_p95_ms", "later_ack_p95_ms", "event_p95_ms", "event_p99_ms", "lost_deliveries",
        "unanswered_commands", "daphne_cpu_share", "daphne_rss_mb", "machine_busy_percent")}
        for server in dict.fromkeys(SERVERS)}
    print(json.dumps({"servers": summary,
                      "runs": [{key: value for key, value in run.items() if key != "timeline"} for run in runs]}))


def measure(server: str, project, task, tokens: list[str], chart_suffix: str = "") -> dict:
    """One run of the load against `server`: its report (the bench's JSON when one server is measured)."""
    import psutil

    from bench.chart import line_chart_svg
    from rollouts.events import event_append
    from rollouts.models import Episode

    episodes = [Episode.objects.create(project=project, task=task, seed=i, mode="supervised", status="running")
                for i in range(EPISODES)]

    ports = [free_port() for _ in range(DAPHNES)]
    servers = [subprocess.Popen(server_command(server, port), cwd=ROOT, env=dict(os.environ),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for port in ports]
    daphnes = [psutil.Process(process.pid) for process in servers]
    append_latency: list[float] = []
    memory: list[list[tuple[float, float]]] = [[] for _ in daphnes]
    machine_busy: list[tuple[float, float]] = []  # (second of the run, % of all cores busy since the last tick)
    try:
        for port in ports:
            wait_listening(port, seconds=120)  # a loaded machine takes a while to import the app
        # The client runs in CLIENTS processes, each with its share of the sockets (bench/ws_clients.py).
        per_daphne = max(1, CLIENTS // DAPHNES)  # client processes, each reading sockets of one daphne
        shares = {(d, c): [] for d in range(DAPHNES) for c in range(per_daphne)}
        for number, (index, person) in enumerate((i, n) for i in range(len(episodes)) for n in range(PEOPLE)):
            share = shares[(index + person) % DAPHNES, number // DAPHNES % per_daphne]
            share.append((episodes[index].pk, tokens[person], person == 0,
                          phase(index, len(episodes)) * COMMAND_INTERVAL))
        clients = Clients([(ports[d], share) for (d, _), share in shares.items()], COMMAND_INTERVAL)
        cpu_before = [sum(daphne.cpu_times()[:2]) for daphne in daphnes]
        psutil.cpu_percent()  # the machine's busy share is measured from here
        started, started_wall = time.monotonic(), time.time()
        clients.go()
        steps = 0
        while time.monotonic() - started < SECONDS:
            for index, episode in enumerate(episodes):  # each episode at its own moment of the step interval
                time.sleep(max(0.0, started + (steps + phase(index, len(episodes))) * STEP_INTERVAL - time.monotonic()))
                t = time.time()
                event_append(episode_id=episode.pk, type="step.executed", payload={"index": steps, "t": t})
                append_latency.append(time.time() - t)  # stored, committed and published, on the writer's side
            steps += 1
            for series, daphne in zip(memory, daphnes):
                series.append((time.monotonic() - started, daphne.memory_info().rss / 2**20))
            machine_busy.append((round(time.monotonic() - started, 1), psutil.cpu_percent()))
            time.sleep(max(0.0, started + steps * STEP_INTERVAL - time.monotonic()))
        time.sleep(3)  # the last events and acks arrive
        cpu = [sum(daphne.cpu_times()[:2]) - before for daphne, before in zip(daphnes, cpu_before)]
        measured = clients.finish()
        event_latency, ack_latency = measured["event"], measured["ack"]  # (received at, latency), in seconds
        # all but each controller's first command (which also makes them controller), and the events of the sockets
        # that only watch (the controller's also wait on its commands)
        later_ack_latency, watcher_latency = measured["later_ack"], measured["watcher"]
        errors, unanswered = measured["errors"], measured["unanswered"]
    finally:
        for process in servers:
            process.terminate()
        for process in servers:
            process.wait(timeout=10)
        Episode.objects.filter(pk__in=[e.pk for e in episodes]).delete()
    expected = steps * EPISODES * PEOPLE
    timeline = {"event_p95_ms": per_second(event_latency, started_wall),
                "ack_p95_ms": per_second(ack_latency, started_wall),
                # the whole machine (every core) busy: daphne, the clients, the writer, PostgreSQL and Redis share it
                "machine_busy_percent": machine_busy}
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    load = f"Load: {EPISODES * PEOPLE} sockets on {DAPHNES} daphne{'s' if DAPHNES > 1 else ''}, " \
           f"{EPISODES / STEP_INTERVAL:.0f} events/s"
    (out / f"load-memory{chart_suffix}.svg").write_text(line_chart_svg(
        {f"daphne {n + 1}" if DAPHNES > 1 else "daphne": series for n, series in enumerate(memory)},
        title=f"{load} — daphne memory", x_label="seconds", y_label="resident MB"))
    (out / f"load-latency{chart_suffix}.svg").write_text(line_chart_svg(
        {"event p95": timeline["event_p95_ms"], "command ack p95": timeline["ack_p95_ms"]},
        title=f"{load}, {EPISODES / COMMAND_INTERVAL:.0f} commands/s — latency p95 per second", x_label="seconds",
        y_label="ms", bands={"goal 50 ms": 50.0}))
    event_latency = [latency for _, latency in event_latency]
    ack_latency = [latency for _, latency in ack_latency]
    return {
        "server": server, "sockets": EPISODES * PEOPLE, "daphnes": DAPHNES, "duration_s": SECONDS, "burst": BURST,
        "client_processes": len(clients.processes),
        "events_per_second": round(EPISODES / STEP_INTERVAL, 1),
        "commands_per_second": round(EPISODES / COMMAND_INTERVAL, 1),
        "deliveries": len(event_latency), "expected_deliveries": expected, "lost_deliveries": expected - len(event_latency),
        "event_p50_ms": percentile(event_latency, .5), "event_p95_ms": percentile(event_latency, .95),
        "event_p99_ms": percentile(event_latency, .99),
        "watcher_event_p95_ms": percentile(watcher_latency, .95), "watcher_event_p99_ms": percentile(watcher_latency, .99),
        "append_p50_ms": percentile(append_latency, .5), "append_p95_ms": percentile(append_latency, .95),
        "acks": len(ack_latency), "ack_p50_ms": percentile(ack_latency, .5), "ack_p95_ms": percentile(ack_latency, .95),
        "ack_p99_ms": percentile(ack_latency, .99),
        "later_ack_p50_ms": percentile(later_ack_latency, .5), "later_ack_p95_ms": percentile(later_ack_latency, .95),
        "later_ack_p99_ms": percentile(later_ack_latency, .99), "unanswered_commands": unanswered, "errors": errors,
        # each daphne's resident memory at the start and the end, and its share of a core over the run
        "daphne_rss_mb": [{"start": round(series[0][1], 1), "end": round(series[-1][1], 1)} for series in memory
                          if series],
        "daphne_cpu_share": [round(seconds / SECONDS, 2) for seconds in cpu],
        "machine_busy_percent": round(sum(p for _, p in machine_busy) / len(machine_busy), 1) if machine_busy else None,
        "timeline": timeline,
        "target": "event p95 < 50 ms and p99 < 100 ms, command ack p95 < 50 ms, no lost delivery, no error",
    }


if __name__ == "__main__":
    main()
