"""A supervised episode steered over the real WebSocket (daphne) with a real rollout worker."""
import json
import time

import pytest
import websocket
from rest_framework.test import APIClient

from annotation.models import Command, Intervention
from rollouts.models import Episode, EpisodeStatus, Rejection, Step
from tests.factories import PASSWORD, make_member, make_project, make_task, make_tiny_checkpoint, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

EMPTY_SPOT = "click(x=3, y=207)"  # a corner of the task area with nothing on it


class Session:
    """A scripted annotator on the socket: send commands, wait for typed messages."""

    def __init__(self, base: str, episode_id: int, username: str, after: int = 0):
        client = APIClient()
        token = client.post("/api/v1/auth/token", {"username": username, "password": PASSWORD},
                            format="json").json()["token"]
        url = base.replace("http", "ws") + f"/ws/episodes/{episode_id}/?after={after}"
        self.ws = websocket.create_connection(url, header=[f"Authorization: Bearer {token}"], timeout=300,
                                              suppress_origin=True)
        self.seen: list[dict] = []
        self.counter = 0

    def send(self, type: str, **fields) -> str:
        self.counter += 1
        command_id = f"c{self.counter}-{time.monotonic_ns()}"
        self.ws.send(json.dumps({"type": type, "id": command_id, **fields}))
        return command_id

    def wait(self, predicate, what: str, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.ws.settimeout(max(1, deadline - time.monotonic()))
            message = json.loads(self.ws.recv())
            self.seen.append(message)
            if predicate(message):
                return message
        raise AssertionError(f"no {what} within {timeout} s; saw {[m['type'] for m in self.seen[-10:]]}")

    def wait_type(self, type: str, **data) -> dict:
        return self.wait(lambda m: m["type"] == type and all(m.get("data", {}).get(k) == v for k, v in data.items()),
                         f"{type} {data}")

    def ack(self, command_id: str) -> dict:
        return self.wait(lambda m: m.get("id") == command_id and m["type"] in ("ack", "error"), f"reply to {command_id}")


@pytest.fixture
def supervised(daphne_server, celery_worker, tmp_path_factory):
    project = make_project()
    for name in ("ann", "ann2"):
        make_member(project, make_user(name))
    task = make_task(project, "click-button", max_steps=10)
    make_tiny_checkpoint(project, tmp_path_factory.mktemp("ckpt") / "untrained")
    client = APIClient()
    client.login(username="ann", password=PASSWORD)
    response = client.post(f"/api/v1/projects/{project.pk}/episodes/", {"task": task.pk, "seeds": [5],
                                                                         "mode": "supervised"}, format="json")
    assert response.status_code == 201, response.content
    return daphne_server, response.json()["results"][0]["id"]


def test_annotator_edits_rejects_takes_over_hands_back_and_finishes(supervised):
    base, episode_id = supervised
    s = Session(base, episode_id, "ann")
    assert s.wait_type("hello")["data"]["role"] == "annotator"

    first = s.wait_type("step.proposed", index=0)["data"]
    if first["action"] is None:  # an untrained model's proposal is a void turn: it cannot be approved
        refused = s.ack(s.send("approve", index=0))
        assert refused["type"] == "ack"  # stored; the worker then refuses it on the log
        s.wait(lambda m: m["type"] == "error" and "could not be read as an action" in m["data"]["message"], "the refusal")
    assert s.ack(s.send("edit", index=0, thought="The target is elsewhere.", action=EMPTY_SPOT))["type"] == "ack"
    edited = s.wait_type("step.executed", index=0)["data"]
    assert edited["actor"] == "edited" and edited["action_text"] == EMPTY_SPOT
    assert edited["proposal"]["raw"] == first["raw"]

    proposed = s.wait_type("step.proposed", index=1)["data"]
    assert proposed["attempt"] == 1 and proposed["rejected"] == []
    cid = s.send("reject", index=1, reason="not useful")
    assert s.ack(cid)["type"] == "ack"
    again = s.wait_type("step.proposed", index=1)["data"]  # the model proposes again, told it was rejected
    assert again["attempt"] == 2
    assert [(r["reason"], r["rejected_by"], r["action_text"]) for r in again["rejected"]] == [
        ("not useful", "ann", proposed["action_text"])]
    assert again["repeated"] == (again["raw"] == proposed["raw"] or (
        again["action"] is not None and again["action"] == proposed["action"]))
    rejection = Rejection.objects.get(episode_id=episode_id, step_index=1)
    assert rejection.raw_output == proposed["raw"] and rejection.rejected_by.username == "ann"
    assert "Feedback: A person rejected your proposal" not in json.dumps(rejection.prompt)  # it answered the first ask

    s.send("takeover")
    s.wait(lambda m: m["type"] == "control.changed" and m["data"]["human_control"], "takeover")
    off_screen = s.ack(s.send("act", action="click(x=999, y=5)"))
    assert off_screen["type"] == "error" and "outside" in off_screen["data"]["message"]
    cid = s.send("act", action=EMPTY_SPOT, thought="I click the corner myself.")
    assert s.ack(cid)["type"] == "ack"
    human = s.wait_type("step.executed", index=1)["data"]
    assert human["actor"] == "human" and human["thought"] == "I click the corner myself."
    assert [r["reason"] for r in human["rejections"]] == ["not useful"]  # the step keeps its rejected proposal
    # re-sending the same id changes nothing
    s.ws.send(json.dumps({"type": "act", "id": cid, "action": EMPTY_SPOT}))
    assert s.ack(cid)["duplicate"] is True

    s.send("handback")
    s.wait(lambda m: m["type"] == "control.changed" and not m["data"]["human_control"], "handback")
    s.wait_type("step.proposed", index=2)
    s.send("finish", outcome="failure", comment="gave up on purpose")
    s.wait_type("episode.finished")
    s.ws.close()

    episode = Episode.objects.get(pk=episode_id)
    assert episode.status == EpisodeStatus.FINISHED and episode.outcome == "failure"
    steps = list(Step.objects.filter(episode=episode).order_by("index").values_list("actor", "action_text"))
    assert steps == [("edited", EMPTY_SPOT), ("human", EMPTY_SPOT)]
    kinds = list(Intervention.objects.filter(episode=episode).values_list("kind", flat=True))
    assert kinds == ["edit", "reject", "takeover", "act", "handback", "finish"] or \
        kinds == ["edit", "reject", "takeover", "act", "handback", "finish"][:]  # approve refused is not an intervention
    assert Command.objects.filter(episode=episode, client_id=cid).count() == 1
    seqs = [m["seq"] for m in s.seen if "seq" in m]
    assert seqs == sorted(set(seqs)) and seqs == list(range(seqs[0], seqs[0] + len(seqs)))


def test_second_annotator_watches_until_control_is_released(supervised):
    base, episode_id = supervised
    owner = Session(base, episode_id, "ann")
    watcher = Session(base, episode_id, "ann2")
    watcher.wait(lambda m: m["type"] == "presence" and set(m["data"]["watchers"]) == {"ann", "ann2"}, "both present")
    owner.wait_type("step.proposed", index=0)
    refused = watcher.ack(watcher.send("edit", index=0, action=EMPTY_SPOT))
    assert refused["type"] == "error" and "controls this episode" in refused["data"]["message"]
    assert watcher.ack(watcher.send("claim"))["type"] == "error"
    assert owner.ack(owner.send("release"))["type"] == "ack"
    assert watcher.ack(watcher.send("claim"))["type"] == "ack"
    watcher.wait(lambda m: m["type"] == "control.changed" and (m["data"]["control"] or {}).get("username") == "ann2",
                 "control passing")
    assert watcher.ack(watcher.send("edit", index=0, action=EMPTY_SPOT))["type"] == "ack"
    assert watcher.wait_type("step.executed", index=0)["data"]["actor"] == "edited"
    watcher.send("finish", outcome="infeasible")
    watcher.wait_type("episode.finished")
    assert Episode.objects.get(pk=episode_id).controller.username == "ann2"


def test_reconnecting_client_sees_every_event_once(supervised):
    base, episode_id = supervised
    first = Session(base, episode_id, "ann")
    first.wait_type("step.proposed", index=0)
    first.send("edit", index=0, action=EMPTY_SPOT)
    first.wait_type("step.executed", index=0)
    last_seq = max(m["seq"] for m in first.seen if "seq" in m)
    first.ws.close()  # dropped mid-episode; events keep coming while it is away
    time.sleep(2)
    second = Session(base, episode_id, "ann", after=last_seq)
    second.wait_type("step.proposed", index=1)
    second.send("finish", outcome="failure")
    second.wait_type("episode.finished")
    seqs = [m["seq"] for m in first.seen + second.seen if "seq" in m]
    assert seqs == list(range(1, len(seqs) + 1)), seqs  # no gap, no duplicate


def test_manager_takes_control_from_the_annotator(supervised):
    from projects.models import Role

    base, episode_id = supervised
    manager = make_user("boss")
    make_member(Episode.objects.get(pk=episode_id).project, manager, Role.MANAGER)
    owner = Session(base, episode_id, "ann")
    boss = Session(base, episode_id, "boss")
    owner.wait_type("step.proposed", index=0)
    assert owner.ack(owner.send("edit", index=0, action=EMPTY_SPOT))["type"] == "ack"  # the annotator controls it
    owner.wait_type("step.executed", index=0)
    owner.wait_type("step.proposed", index=1)

    assert boss.ack(boss.send("claim"))["type"] == "ack"  # no release needed: a manager may take control
    owner.wait(lambda m: m["type"] == "control.changed" and (m["data"]["control"] or {}).get("username") == "boss",
               "control passing to the manager")
    refused = owner.ack(owner.send("edit", index=1, action=EMPTY_SPOT))
    assert refused["type"] == "error" and "boss controls this episode" in refused["data"]["message"]
    assert boss.ack(boss.send("edit", index=1, action=EMPTY_SPOT, thought="I steer now."))["type"] == "ack"
    assert boss.wait_type("step.executed", index=1)["data"]["actor"] == "edited"
    boss.send("finish", outcome="failure")
    boss.wait_type("episode.finished")
    steps = Step.objects.filter(episode_id=episode_id).order_by("index")
    assert [s.intervened_by.username for s in steps] == ["ann", "boss"]
