"""Live sessions for the fault tests: a project served by the scripted-solver baseline (a real Chromium,
no model to load), and watchers that behave like the browser's socket client: they reconnect with
`after=<last seq>` when the connection drops, re-send unacknowledged commands with the same ids, and
record every gap, duplicate and reconnect, so a test can end by checking that nothing was lost or doubled."""
from __future__ import annotations

import json
import threading
import time

import websocket  # websocket-client

from flywheel.models import Checkpoint, Episode, Event, Membership
from tests.factories import make_project, make_task, make_user

__all__ = ["scripted_project", "Watcher", "assert_saw_the_whole_log", "assert_acked_commands_stored_once",
           "wait_episodes_end"]


def scripted_project(task_name: str = "login-user", *, max_steps: int = 8, annotators: int = 2):
    """A project whose rollouts use the scripted solvers (backend `scripted`), and annotators with tokens."""
    from flywheel import services
    from webapp.auth import token_create

    project = make_project()
    task = make_task(project, task_name, max_steps=max_steps)
    baseline = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:",
                                         base_model="scripted solvers (no model)")
    services.deployment_promote(project=project, checkpoint=baseline, backend="scripted", reason="fault tests")
    users = [make_user() for _ in range(annotators)]
    for user in users:
        Membership.objects.create(project=project, user=user, role="annotator")
    return project, task, users, [token_create(user=user)[1] for user in users]


class Watcher:
    """One socket on one episode, in a thread. With ``approve=True`` it also steers: it approves every
    proposal (the first command makes it the episode's controller)."""

    def __init__(self, base: str | list[str], episode_id: int, token: str, *, approve: bool = False, name: str = ""):
        self.bases = [base] if isinstance(base, str) else list(base)  # tries the next one when one is down
        self.episode_id, self.token, self.approve = episode_id, token, approve
        self.name = name or f"watcher-{episode_id}"
        self.events: list[dict] = []
        self.arrivals: list[float] = []
        self.problems: list[str] = []
        self.acked: dict[str, dict] = {}
        self.unacked: dict[str, dict] = {}
        self.connects = 0
        self.finished = threading.Event()
        self._stop = threading.Event()
        self._ws = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
        self._thread.start()

    @property
    def last_seq(self) -> int:
        return self.events[-1]["seq"] if self.events else 0

    def _connect(self):
        base = self.bases[self.connects % len(self.bases)]
        url = base.replace("http", "ws") + f"/ws/episodes/{self.episode_id}/?after={self.last_seq}"
        ws = websocket.create_connection(url, header=[f"Authorization: Bearer {self.token}"], timeout=5,
                                         suppress_origin=True)
        self.connects += 1
        with self._lock:
            self._ws = ws
            for frame in self.unacked.values():  # as the browser does after a reconnect
                ws.send(json.dumps(frame))
        return ws

    def send(self, frame: dict) -> None:
        with self._lock:
            self.unacked[frame["id"]] = frame
            if self._ws is not None:
                try:
                    self._ws.send(json.dumps(frame))
                except (websocket.WebSocketException, OSError):
                    pass  # re-sent on reconnect

    def _on(self, message: dict) -> None:
        if "seq" in message:
            seq = message["seq"]
            if seq <= self.last_seq:
                self.problems.append(f"duplicate seq {seq} after {self.last_seq}")
                return
            if seq != self.last_seq + 1:
                self.problems.append(f"gap: seq {seq} after {self.last_seq}")
            self.events.append(message)
            self.arrivals.append(time.monotonic())
            data = message.get("data") or {}
            if message["type"] == "step.proposed" and self.approve and data.get("action") is not None:
                self.send({"type": "approve", "id": f"approve-{self.episode_id}-{data['index']}",
                           "index": data["index"]})
            if message["type"] == "episode.finished":
                self.finished.set()
        elif message.get("type") in ("ack", "error") and message.get("id") in self.unacked:
            with self._lock:
                frame = self.unacked.pop(message["id"])
            if message["type"] == "ack":
                self.acked[message["id"]] = message
            elif "Proposal" not in message["data"]["message"]:  # a re-sent approve of a decided proposal
                self.problems.append(f"command {frame} refused: {message['data']['message']}")

    def _run(self):
        while not self._stop.is_set():
            try:
                ws = self._connect()
                ws.settimeout(1)
                while not self._stop.is_set():
                    try:
                        opcode, data = ws.recv_data(control_frame=True)
                    except websocket.WebSocketTimeoutException:
                        continue
                    if opcode == websocket.ABNF.OPCODE_CLOSE:
                        code = int.from_bytes(data[:2], "big") if len(data) >= 2 else None
                        if code in (4401, 4403, 4009, 4029):
                            self.problems.append(f"closed with {code}")
                        break
                    if opcode == websocket.ABNF.OPCODE_TEXT:
                        self._on(json.loads(data))
            except (websocket.WebSocketException, OSError, ValueError):
                pass
            with self._lock:
                self._ws = None
            if not self._stop.is_set():
                time.sleep(0.5)

    def close(self):
        self._stop.set()
        with self._lock:
            if self._ws is not None:
                try:
                    self._ws.close()
                except Exception:
                    pass
        self._thread.join(10)


def wait_episodes_end(episode_ids, timeout: float) -> None:
    from tests.stack import wait_for

    wait_for(lambda: not Episode.objects.filter(pk__in=episode_ids).exclude(
        status__in=["finished", "failed", "interrupted"]).exists(), timeout, interval=0.5, what="the episodes to end")


def assert_saw_the_whole_log(watcher: Watcher, timeout: float = 60) -> None:
    """The watcher received every stored event of its episode, once each, in order, as stored."""
    from tests.stack import wait_for

    last = Episode.objects.get(pk=watcher.episode_id).last_seq
    wait_for(lambda: watcher.last_seq >= last, timeout, what=f"{watcher.name} to reach seq {last} "
                                                            f"(at {watcher.last_seq}; {watcher.problems})")
    stored = [{"type": e.type, "seq": e.seq, "data": e.payload}
              for e in Event.objects.filter(episode_id=watcher.episode_id).order_by("seq")]
    assert [e["seq"] for e in stored] == list(range(1, last + 1)), "the stored log itself has a gap"
    got = [{"type": e["type"], "seq": e["seq"], "data": e["data"]} for e in watcher.events[:last]]
    assert got == stored, f"{watcher.name} saw another log than the stored one"
    assert not watcher.problems, f"{watcher.name}: {watcher.problems}"


def assert_acked_commands_stored_once(watchers) -> int:
    """Every command acknowledged to a watcher is stored exactly once, and each applied one has one intervention.
    Returns how many were checked."""
    from annotation.models import Command, Intervention

    checked = 0
    for watcher in watchers:
        for command_id in watcher.acked:
            rows = list(Command.objects.filter(episode_id=watcher.episode_id, client_id=command_id))
            assert len(rows) == 1, f"command {command_id}: {len(rows)} rows"
            if rows[0].status == "applied" and rows[0].type not in ("claim", "release"):
                assert Intervention.objects.filter(command=rows[0]).count() == 1, command_id
            checked += 1
    return checked
