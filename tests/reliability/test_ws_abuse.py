"""Abusive WebSocket clients against a real daphne: a flood is closed 4029 while a watcher of the same episode
keeps receiving every event; random frames each get one answer and never break the socket; a huge frame
closes 4009 and the server carries on."""
from __future__ import annotations

import json
import random
import string
import threading
import time

import pytest
import websocket  # websocket-client

from rollouts.events import event_append
from rollouts.models import Episode
from tests.factories import make_member, make_project, make_task, make_user
from tests.stack import ProcessStack, stack_env, start_daphne
from webapp.auth import token_create

pytestmark = pytest.mark.django_db(transaction=True)

RATE, BURST = 20, 400  # the daphne under test: the random-frame run (300 frames at once) fits in the burst


@pytest.fixture(scope="module")
def abuse_daphne(module_stack):
    stack, path = module_stack
    base = start_daphne(stack, path, stack_env(LOUPE_WS_MAX_FRAMES_PER_SECOND=RATE, LOUPE_WS_FRAME_BURST=BURST),
                        name="daphne-abuse")
    return base, stack


@pytest.fixture
def live_episode():
    project = make_project()
    users = [make_user() for _ in range(2)]
    for user in users:
        make_member(project, user)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised",
                                     status="running", screen_width=160, screen_height=210)
    return episode, [token_create(user=user)[1] for user in users]


def connect(base: str, episode_id: int, token: str, after: int = 0):
    ws = websocket.create_connection(base.replace("http", "ws") + f"/ws/episodes/{episode_id}/?after={after}",
                                     header=[f"Authorization: Bearer {token}"], timeout=20, suppress_origin=True)
    assert json.loads(ws.recv())["type"] == "hello"
    return ws


def read_until_close(ws, timeout: float = 60) -> tuple[int, str, list[dict]]:
    """(close code, reason, the messages before it). Frames are read as they come, without answering the close:
    a server that closed on a client still sending resets the connection, and the answer would fail on it."""
    ws.settimeout(timeout)
    messages = []
    while True:
        frame = ws.recv_frame()
        if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(frame.data[:2], "big"), frame.data[2:].decode(errors="replace"), messages
        if frame.opcode == websocket.ABNF.OPCODE_TEXT:
            messages.append(json.loads(frame.data))


def answer_to(ws, command_id: str, timeout: float = 30) -> dict:
    """The ack or error for one command, skipping events and presence."""
    ws.settimeout(timeout)
    while True:
        message = json.loads(ws.recv())
        if message.get("id") == command_id and message["type"] in ("ack", "error"):
            return message


def test_a_flood_is_closed_4029_while_a_watcher_of_the_same_episode_gets_every_event(abuse_daphne, live_episode):
    base, stack = abuse_daphne
    episode, (abuser_token, watcher_token) = live_episode
    watcher = connect(base, episode.pk, watcher_token)
    abuser = connect(base, episode.pk, abuser_token)
    sent = {"frames": 0}

    def flood():
        try:
            for i in range(20_000):
                abuser.send(json.dumps({"type": "pause", "id": f"flood-{i}"}))
                sent["frames"] += 1
        except (websocket.WebSocketException, OSError):
            pass  # the server closed it

    watched: list[tuple[dict, float]] = []

    def watch():  # stamps each event when it arrives, not when the test gets round to reading it
        watcher.settimeout(120)
        while sum(m["type"] == "step.executed" for m, _ in watched) < 10:
            message = json.loads(watcher.recv())
            if "seq" in message:
                watched.append((message, time.monotonic()))

    watching = threading.Thread(target=watch)
    watching.start()
    flooder = threading.Thread(target=flood)
    started = time.monotonic()
    flooder.start()
    appended = {}
    for i in range(10):  # the episode goes on during the flood
        appended[event_append(episode_id=episode.pk, type="step.executed", payload={"index": i}).seq] = time.monotonic()
        time.sleep(0.2)
    code, _, before = read_until_close(abuser)
    flooder.join(60)
    assert code == 4029
    assert before[-1]["type"] == "error" and "at most 20 a second" in before[-1]["data"]["message"], before[-1]
    answered = [m for m in before if m["type"] in ("ack", "error") and str(m.get("id", "")).startswith("flood-")]
    elapsed = time.monotonic() - started
    # the burst was served, and what refilled while it was served, then the socket was cut off
    assert BURST <= len(answered) <= BURST + RATE * elapsed + 1, (len(answered), elapsed)
    assert sent["frames"] > len(answered)
    watching.join(120)
    received = list(watched)
    seqs = [m["seq"] for m, _ in received]
    assert seqs == list(range(1, len(seqs) + 1)) and set(appended) <= set(seqs), seqs  # no gap, no duplicate
    worst = max(at - appended[m["seq"]] for m, at in received if m["seq"] in appended)
    assert worst < 10, f"a watcher waited {worst:.1f} s for an event during the flood"
    # being closed is not a ban: the same person reconnects and is served
    again = connect(base, episode.pk, abuser_token, after=max(appended))
    again.send(json.dumps({"type": "resume", "id": "after-the-flood"}))
    assert answer_to(again, "after-the-flood")
    again.close()
    watcher.close()
    assert "Traceback" not in stack.tail(200)


def _random_frame(rng: random.Random) -> tuple[str, object]:
    """('text' | 'binary', payload): garbage, odd JSON, and commands with wrong or hostile fields."""
    kinds = ["pause", "resume", "approve", "edit", "reject", "takeover", "act", "handback", "finish", "claim",
             "release", "", "PAUSE", "drop table", None, 7, [], {}]
    junk = [None, True, -1, 2**70, 1e308, float("nan"), "", "x" * 300, "\u0000\ud7ff\ufffe", [1, [2, [3]]],
            {"$gt": ""}, "click(x=-5, y=99999)", "click(x=1e9, y=1)", "type(text=\"" + "a" * 3000 + "\")",
            "../../etc/passwd", "<script>alert(1)</script>"]
    choice = rng.random()
    if choice < 0.15:
        return "binary", bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300)))
    if choice < 0.3:
        return "text", "".join(rng.choice(string.printable + "\u00e9\u4e2d\U0001f600") for _ in range(rng.randint(0, 200)))
    if choice < 0.4:
        return "text", json.dumps(rng.choice(junk + [[], 3, "just a string"]), allow_nan=True)
    if choice < 0.45:  # nested past the JSON parser's recursion limit, and just under it
        depth = rng.choice([30_000, 900])
        return "text", '{"type": "pause", "id": "deep", "x": ' + "[" * depth + "]" * depth + "}"
    frame = {"type": rng.choice(kinds)}
    if rng.random() < 0.9:
        frame["id"] = rng.choice([f"fz-{rng.getrandbits(40)}", rng.choice(junk), "y" * 65])
    for field in rng.sample(["index", "action", "thought", "reason", "outcome", "answer", "comment", "extra"],
                            rng.randint(0, 4)):
        frame[field] = rng.choice(junk + [0, 1, "success", "click(x=10, y=20)"])
    return "text", json.dumps(frame, allow_nan=True)


def test_random_frames_each_get_one_answer_and_never_break_the_socket(abuse_daphne, live_episode):
    base, stack = abuse_daphne
    episode, (token, watcher_token) = live_episode
    ws = connect(base, episode.pk, token)
    rng = random.Random(20261203)
    frames = [_random_frame(rng) for _ in range(300)]
    for kind, payload in frames:
        if kind == "binary":
            ws.send_binary(payload)
        else:
            ws.send(payload)
    answers = []
    ws.settimeout(60)
    while len(answers) < len(frames):
        message = json.loads(ws.recv())
        if message["type"] in ("ack", "error"):
            answers.append(message)
        else:
            assert message["type"] in ("presence", "control.changed", "episode.state"), message
    assert all(isinstance(a.get("data", {}).get("message", ""), str) for a in answers)
    assert any(a["type"] == "ack" for a in answers) and any(a["type"] == "error" for a in answers)
    # the socket still works: an event reaches it, and a plain command is acknowledged
    seq = event_append(episode_id=episode.pk, type="step.executed", payload={"index": 0}).seq
    ws.send(json.dumps({"type": "release", "id": "plain"}))
    seen = set()
    while not {"event", "ack"} <= seen:
        message = json.loads(ws.recv())
        if message.get("seq") == seq:
            seen.add("event")
        if message.get("id") == "plain":
            seen.add("ack" if message["type"] in ("ack", "error") else message["type"])
    ws.close()
    log = stack.tail(400)
    assert "could not be stored" not in log and "Traceback" not in log, log[-3000:]


def test_huge_frames_are_refused_and_the_server_serves_the_next_socket(abuse_daphne, live_episode):
    base, stack = abuse_daphne
    episode, (token, _) = live_episode
    ws = connect(base, episode.pk, token)
    ws.send_binary(b"\x00" * (512 * 1024))  # over LOUPE_WS_MAX_FRAME_BYTES: our consumer closes it
    assert read_until_close(ws)[0] == 4009
    ws = connect(base, episode.pk, token)
    try:  # over daphne's own 1 MiB message limit: autobahn drops the connection before our code sees it
        ws.send_binary(b"\x00" * (8 * 1024 * 1024))
        code = read_until_close(ws)[0]
        assert code == 1009, code
    except (websocket.WebSocketException, OSError):
        pass
    again = connect(base, episode.pk, token)
    again.send(json.dumps({"type": "pause", "id": "still-here"}))
    assert answer_to(again, "still-here")["type"] == "ack"
    again.close()
    assert "Traceback" not in stack.tail(200)


def test_the_frame_bucket_allows_a_burst_then_the_rate():
    from annotation.consumers import FrameBucket

    now = [0.0]
    bucket = FrameBucket(rate=2, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.5  # one frame's worth at 2 a second
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] += 60  # refills only up to the burst
    assert sum(bucket.take() for _ in range(10)) == 3
