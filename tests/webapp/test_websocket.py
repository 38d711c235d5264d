"""The episode WebSocket through a real daphne process on a real socket."""
import json

import pytest
import websocket  # websocket-client

from rollouts.events import event_append
from rollouts.models import Episode
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def login_cookie(base: str, username: str) -> str:
    import http.cookiejar
    import urllib.request

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    try:
        opener.open(base + "/api/v1/auth/session")
    except urllib.error.HTTPError:
        pass
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    request = urllib.request.Request(base + "/api/v1/auth/session", method="POST",
                                     data=json.dumps({"username": username, "password": PASSWORD}).encode(),
                                     headers={"Content-Type": "application/json", "X-CSRFToken": csrf,
                                              "Referer": base + "/"})
    opener.open(request).close()
    return "; ".join(f"{c.name}={c.value}" for c in jar)


@pytest.fixture
def episode_setup(transactional_db):
    project = make_project()
    member = make_user("member")
    make_member(project, member)
    stranger = make_user("stranger")
    make_member(make_project(), stranger)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=3)
    for i in range(3):
        event_append(episode_id=episode.pk, type="step.executed", payload={"index": i})
    return episode


def connect(base: str, episode_id: int, *, cookie: str | None = None, origin: str | None = None, after: int = 0,
            header: list[str] | None = None):
    url = base.replace("http", "ws") + f"/ws/episodes/{episode_id}/?after={after}"
    ws = websocket.create_connection(url, cookie=cookie, origin=origin, header=header or [], timeout=30,
                                     suppress_origin=origin is None)
    return ws


def recv(ws) -> dict:
    """The next message that is not the per-connection hello/presence."""
    while True:
        message = json.loads(ws.recv())
        if message["type"] not in ("hello", "presence"):
            return message


def close_code(ws) -> int:
    ws.settimeout(10)
    while True:
        opcode, data = ws.recv_data(control_frame=True)
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return int.from_bytes(data[:2], "big")


def test_socket_without_a_session_is_closed_4401(daphne_server, episode_setup):
    ws = connect(daphne_server, episode_setup.pk, origin=daphne_server)
    assert close_code(ws) == 4401


def test_socket_from_a_foreign_origin_is_closed_4403(daphne_server, episode_setup):
    cookie = login_cookie(daphne_server, "member")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin="http://evil.example")
    assert close_code(ws) == 4403


def test_socket_of_a_non_member_is_closed_4403(daphne_server, episode_setup):
    cookie = login_cookie(daphne_server, "stranger")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin=daphne_server)
    assert close_code(ws) == 4403


def test_member_gets_the_replay_after_seq_then_live_events(daphne_server, episode_setup):
    cookie = login_cookie(daphne_server, "member")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin=daphne_server, after=1)
    hello = json.loads(ws.recv())
    assert hello["type"] == "hello" and hello["data"]["username"] == "member" and hello["data"]["server_time"] > 0
    replay = [recv(ws) for _ in range(2)]
    assert [m["seq"] for m in replay] == [2, 3]
    assert replay[0]["type"] == "step.executed" and replay[0]["data"] == {"index": 1}
    event_append(episode_id=episode_setup.pk, type="step.executed", payload={"index": 3})
    live = recv(ws)
    assert live["seq"] == 4 and live["data"] == {"index": 3}
    ws.close()


def test_bearer_token_socket_needs_no_origin(daphne_server, episode_setup):
    import urllib.request

    request = urllib.request.Request(daphne_server + "/api/v1/auth/token", method="POST",
                                     data=json.dumps({"username": "member", "password": PASSWORD}).encode(),
                                     headers={"Content-Type": "application/json"})
    token = json.load(urllib.request.urlopen(request))["token"]
    ws = connect(daphne_server, episode_setup.pk, header=[f"Authorization: Bearer {token}"])
    assert recv(ws)["seq"] == 1
    ws.close()


def test_garbage_frame_gets_an_error_and_the_socket_stays_usable(daphne_server, episode_setup):
    cookie = login_cookie(daphne_server, "member")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin=daphne_server, after=3)
    ws.send("\x00not json")
    error = recv(ws)
    assert error["type"] == "error" and "not JSON" in error["data"]["message"]
    event_append(episode_id=episode_setup.pk, type="step.executed", payload={"index": 9})
    assert recv(ws)["seq"] == 4
    ws.close()


def test_oversized_frame_is_closed_4009(daphne_server, episode_setup):
    cookie = login_cookie(daphne_server, "member")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin=daphne_server, after=3)
    ws.send("x" * 200_000)
    assert close_code(ws) == 4009


def test_an_event_whose_broadcast_never_came_is_sent_from_the_log_once(daphne_server, episode_setup):
    """The pub/sub layer keeps nothing for a subscriber that is away (a Redis restart), and the last event before a
    pause (a proposal waiting for its approval) has no later one to show the gap: the sockets' sweep sends it from
    the stored log, and the broadcasts after it carry on without a repeat."""
    from rollouts.events import publishes_collected

    cookie = login_cookie(daphne_server, "member")
    ws = connect(daphne_server, episode_setup.pk, cookie=cookie, origin=daphne_server, after=3)
    assert json.loads(ws.recv())["type"] == "hello"
    never_sent: list = []
    with publishes_collected(never_sent):  # stored, and its broadcast kept here instead of sent
        event_append(episode_id=episode_setup.pk, type="step.proposed", payload={"index": 3})
    assert len(never_sent) == 1
    ws.settimeout(15)
    message = recv(ws)
    assert message["seq"] == 4 and message["type"] == "step.proposed" and message["data"] == {"index": 3}
    event_append(episode_id=episode_setup.pk, type="step.executed", payload={"index": 3})
    assert recv(ws)["seq"] == 5
    event_append(episode_id=episode_setup.pk, type="step.executed", payload={"index": 4})
    assert recv(ws)["seq"] == 6
    ws.close()
