"""The benches' WebSocket client (bench_load, bench_fanout): one process reads its share of the sockets on one thread as
frames arrive and sends its controllers' commands on another. The benches run several of these processes, forked:
with a thread per socket in one process, 100-120 threads took turns on one interpreter and that queueing showed as
15-25 ms of the measured latency.

Each process puts on `results` what it measured: `event` (received at, stored -> received) and `received` (episode,
seq, received at) for every step.executed, `watcher` (the latencies of sockets that only watch), `ack` and
`later_ack` (sent -> acknowledged; all but each controller's first command), `errors` by kind (a duplicate event,
a refused command, a socket error) and `unanswered` commands; or `crashed` with the traceback. `Clients` runs
them for a bench and merges what they measured."""
from __future__ import annotations

import json
import multiprocessing
import selectors
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, seconds: float = 30.0) -> None:
    """Until a server (a daphne the bench started) accepts connections on `port`, at most `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


class Clients:
    """A bench's client processes, forked, one for each (port, share) with a share: started and connected on
    construction, reading (and sending) from `go()`, stopped by `finish()`, which returns what they all measured."""

    KEPT = ("event", "received", "ack", "later_ack", "watcher")  # the lists each process measures

    def __init__(self, shares: list[tuple[int, list[tuple[int, str, bool, float]]]],
                 command_interval: float = 2.0) -> None:
        from django.db import connection

        context = multiprocessing.get_context("fork")
        self.results, ready = context.Queue(), context.Queue()
        self._go, self._stop = context.Event(), context.Event()
        connection.close()  # the children must not share the parent's database connection
        self.processes = [context.Process(target=client, args=(port, share, self._go, self._stop, ready, self.results,
                                                               command_interval), daemon=True)
                          for port, share in shares if share]
        for process in self.processes:
            process.start()
        for _ in self.processes:
            failure = ready.get(timeout=120)
            if failure:
                raise RuntimeError(f"a client could not connect: {failure}")

    def go(self) -> None:
        self._go.set()

    def finish(self) -> dict:
        """Stop the clients and merge their measures: the KEPT lists, `errors` by kind, `unanswered` commands."""
        self._stop.set()
        merged: dict = {key: [] for key in self.KEPT} | {"errors": {}, "unanswered": 0}
        for _ in self.processes:
            part = self.results.get(timeout=60)
            if "crashed" in part:
                raise RuntimeError(f"a client process failed:\n{part['crashed']}")
            for key in self.KEPT:
                merged[key].extend(part[key])
            merged["unanswered"] += part["unanswered"]
            for kind, count in part["errors"].items():
                merged["errors"][kind] = merged["errors"].get(kind, 0) + count
        for process in self.processes:
            process.join(timeout=10)
        return merged


def client(port: int, share: list[tuple[int, str, bool, float]], go, stop, ready, results,
           command_interval: float = 2.0) -> None:
    try:
        _client(port, share, go, stop, ready, results, command_interval)
    except BaseException:  # the parent reports it instead of waiting for results that will not come
        import traceback

        ready.put(traceback.format_exc())
        results.put({"crashed": traceback.format_exc()})


def _client(port: int, share: list[tuple[int, str, bool, float]], go, stop, ready, results,
            command_interval: float) -> None:
    """One client process: connects its share of the sockets (episode id, token, is the controller, the
    controller's offset in the command interval), reads them all on one thread and sends its controllers'
    commands on another, each every `command_interval` seconds from `go` plus its offset, until `stop`; then puts
    what it measured on `results`."""
    import websocket

    try:
        sockets = [(websocket.create_connection(f"ws://127.0.0.1:{port}/ws/episodes/{episode}/",
                                                header=[f"Authorization: Bearer {token}"], suppress_origin=True,
                                                timeout=30), episode, controller)
                   for episode, token, controller, _ in share]
        offsets = {episode: offset for episode, _, controller, offset in share if controller}
    except Exception as exc:  # noqa: BLE001 - the parent says so
        ready.put(f"{type(exc).__name__}: {exc}")
        return
    ready.put("")
    measured = {"event": [], "received": [], "ack": [], "later_ack": [], "watcher": [], "errors": {}}
    sent_at: dict[str, float] = {}
    lock = threading.Lock()

    def error(kind: str) -> None:
        with lock:
            measured["errors"][kind] = measured["errors"].get(kind, 0) + 1

    def read_one(ws, episode: int, controller: bool, seen: set[int]) -> bool:
        try:
            # a control frame is returned too: recv() would answer daphne's ping and then wait for the next text
            # frame of this socket, and every other socket of the process with it
            opcode, frame = ws.recv_data_frame(control_frame=True)
            if opcode != websocket.ABNF.OPCODE_TEXT:
                return opcode != websocket.ABNF.OPCODE_CLOSE
            message = json.loads(frame.data)
        except Exception as exc:  # noqa: BLE001 - counted in the report
            if not stop.is_set():
                error(f"socket {type(exc).__name__}")
            return False
        now = time.time()
        if message.get("type") == "step.executed":
            if message["seq"] in seen:
                error("duplicate event")
            seen.add(message["seq"])
            measured["event"].append((now, now - message["data"]["t"]))
            measured["received"].append((episode, message["seq"], now))
            if not controller:
                measured["watcher"].append(now - message["data"]["t"])
        elif message.get("type") in ("ack", "error"):
            with lock:
                sent = sent_at.pop(message.get("id"), None)
            if sent is not None:
                measured["ack"].append((now, now - sent))
                if not message["id"].endswith("-1"):
                    measured["later_ack"].append(now - sent)
                if message["type"] == "error":
                    error("command refused")
        return True

    def read_all() -> None:
        selector = selectors.DefaultSelector()
        for ws, episode, controller in sockets:
            selector.register(ws.sock, selectors.EVENT_READ, (ws, episode, controller, set()))
        while not stop.is_set():
            # one frame a turn: websocket-client reads no further than a frame, so the rest of what arrived stays
            # in the socket and the selector offers it again
            for key, _ in selector.select(timeout=0.2):
                if not read_one(*key.data):
                    selector.unregister(key.fileobj)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    go.wait()
    began = time.monotonic()
    schedule = sorted(((began + command_interval + offsets[episode], 1, ws, episode)
                       for ws, episode, controller in sockets if controller), key=lambda item: item[0])
    while schedule and not stop.wait(max(0.0, schedule[0][0] - time.monotonic())):
        due, n, ws, episode = schedule.pop(0)
        command_id = f"load-{episode}-{n}"
        with lock:
            sent_at[command_id] = time.time()
        try:
            ws.send(json.dumps({"type": "pause", "id": command_id}))
        except Exception as exc:  # noqa: BLE001
            error(f"send {type(exc).__name__}")
            continue
        schedule.append((due + command_interval, n + 1, ws, episode))
        schedule.sort(key=lambda item: item[0])
    stop.wait()  # a client of watchers only has nothing to send: it reads until the end
    reader.join(timeout=5)
    for ws, _, _ in sockets:
        ws.close()
    results.put({**measured, "unanswered": len(sent_at)})
