"""The judge (annotation/judge.py, agent/judge.py): the rule judge, k-sample voting, a VLM judge over HTTP that answers
garbage or times out, routing by the judge, calibration against reviewers, and the judge's API."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rest_framework.test import APIClient

from agent.judge import EpisodeForJudge, ScriptedJudgePolicy, judge_votes, parse_verdict
from annotation.reviews import review_submit
from core.errors import ApplicationError
from snapshots import buckets
from annotation import judge
from annotation import tasks as annotation_tasks
from rollouts.models import Judgement
from tests.factories import make_finished_episode, make_task

pytestmark = pytest.mark.django_db

SUCCESS_ANSWER = "Verdict: success\nReason: the confirmation page shows the order."
FAILURE_ANSWER = "Verdict: failure\nReason: the form is still empty."


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def scripted(*answers: str, samples: int | None = None) -> dict:
    return {"backend": "scripted", "answers": list(answers), "samples": samples or len(answers)}


def judged(episode, *answers: str) -> Judgement:
    return judge.judge_episode(episode_id=episode.pk, config=scripted(*answers))


# --- the rule judge and voting ------------------------------------------------------------------------------
def test_the_rule_judge_reads_the_checker_then_the_persons_outcome_then_whether_the_agent_finished(demo):
    project, task = demo["project"], demo["task"]
    paid = make_finished_episode(project, task, steps=[{}], reward=0.93)
    unpaid = make_finished_episode(project, task, steps=[{}], reward=0.0)
    marked = make_finished_episode(project, task, steps=[{}], reward=None, outcome="failure", mode="supervised")
    finished = make_finished_episode(project, task, reward=None, steps=[
        {}, {"action": {"name": "finished", "args": {"answer": "42"}}, "raw": 'Action: finished(answer="42")'}])
    gave_up = make_finished_episode(project, task, steps=[{}, {}], reward=None)
    found = {e: judge.judge_episode(episode_id=e.pk) for e in (paid, unpaid, marked, finished, gave_up)}
    assert [(j.verdict, j.confidence, j.judge) for j in found.values()] == [
        ("success", 1.0, "rule"), ("failure", 1.0, "rule"), ("failure", 1.0, "rule"),
        ("success", 0.5, "rule"), ("failure", 0.5, "rule")]
    assert "paid 0.93 (success needs 0.5)" in found[paid].reason
    assert "marked it a failure" in found[marked].reason
    assert "(42)" in found[finished].reason and "never said it had finished" in found[gave_up].reason


def test_two_of_three_samples_saying_success_is_success_with_confidence_067(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}], reward=None)
    judgement = judged(episode, SUCCESS_ANSWER, FAILURE_ANSWER, SUCCESS_ANSWER)
    assert (judgement.verdict, judgement.confidence, judgement.judge) == ("success", 0.67, "scripted")
    assert judgement.reason == "the confirmation page shows the order."
    assert [v["verdict"] for v in judgement.votes] == ["success", "failure", "success"]
    assert judgement.latest and judgement.config["samples"] == 3


def test_a_garbled_sample_counts_against_the_confidence_and_a_tie_is_no_verdict():
    seen = EpisodeForJudge(instruction="Click OK", actions=["click(x=1, y=2)"])
    garbled = ScriptedJudgePolicy([SUCCESS_ANSWER, "looks good to me", SUCCESS_ANSWER])
    two_of_three = judge_votes(garbled, seen, samples=3)
    assert (two_of_three.verdict, two_of_three.confidence) == ("success", 0.67)
    tie = judge_votes(ScriptedJudgePolicy([SUCCESS_ANSWER, FAILURE_ANSWER]), seen, samples=2)
    assert (tie.verdict, tie.confidence) == ("", None) and "tie" in tie.reason
    with pytest.raises(ValueError):
        judge_votes(ScriptedJudgePolicy([SUCCESS_ANSWER]), seen, samples=0)


@pytest.mark.parametrize("answer, why", [
    ("", "answered nothing"),
    ("The agent succeeded.", "does not start with 'Verdict: success'"),
    ("Verdict: maybe\nReason: unsure", "does not start with 'Verdict: success'"),
    ("Verdict: success", "no 'Reason:' line"),
    ("Verdict: failure\nReason:   ", "no 'Reason:' line"),
])
def test_an_answer_out_of_format_is_no_verdict_saying_why(answer, why):
    vote = parse_verdict(answer)
    assert vote.verdict == "" and why in vote.reason


def test_a_verdict_line_is_read_whatever_its_case_and_the_reason_may_run_over_lines():
    vote = parse_verdict("  VERDICT: Failure\nReason: the list\nis still unsorted.\n")
    assert (vote.verdict, vote.reason) == ("failure", "the list is still unsorted.")


# --- a VLM judge over HTTP --------------------------------------------------------------------------------
class _Stub(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that answers what the test sets: garbage text, or too late."""

    mode = "garbage"
    bodies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        if type(self).mode == "timeout":
            time.sleep(2.0)
        content = "Sure! The agent did a great job here." if type(self).mode == "garbage" else SUCCESS_ANSWER
        reply = json.dumps({"model": body["model"], "choices": [{"message": {"content": content}}]}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the judge gave up waiting

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    _Stub.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_an_openai_judge_that_answers_garbage_then_times_out_records_no_verdict_with_the_reason(demo, stub_server):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}, {}], reward=None)
    config = {"backend": "openai", "model": "judge-vl", "base_url": stub_server, "samples": 2, "screenshots": 2,
              "timeout_seconds": 1, "retries": 0}
    _Stub.mode = "garbage"
    garbage = judge.judge_episode(episode_id=episode.pk, config=config)
    assert garbage.verdict == "" and garbage.confidence is None
    assert "does not start with 'Verdict: success'" in garbage.reason and "great job" in garbage.reason
    assert [v["raw"] for v in garbage.votes] == ["Sure! The agent did a great job here."] * 2
    assert garbage.model == "judge-vl"
    # what the judge was sent: the instruction, the actions, and the last 2 screenshots as image parts
    sent = _Stub.bodies[0]
    assert sent["model"] == "judge-vl" and sent["temperature"] == 0.7
    parts = sent["messages"][1]["content"]
    images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
    assert len(images) == 2 and all(url.startswith("data:image/jpeg;base64,") for url in images)
    text = "\n".join(p["text"] for p in parts if p["type"] == "text")
    assert "Instruction: Click it" in text and "Screen before step 2:" in text and "Screen before step 3:" in text

    _Stub.mode = "timeout"
    started = time.monotonic()
    late = judge.judge_episode(episode_id=episode.pk, config={**config, "samples": 1})
    assert time.monotonic() - started < 5
    assert late.verdict == "" and late.reason.startswith("the judge failed")
    assert "did not answer within 1" in late.reason
    assert list(episode.judgements.values_list("latest", flat=True)) == [True, False]  # newest first


def test_an_openai_judge_that_answers_in_format_gives_its_verdict(demo, stub_server):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=None)
    _Stub.mode = "ok"
    judgement = judge.judge_episode(episode_id=episode.pk, config={
        "backend": "openai", "model": "judge-vl", "base_url": stub_server, "samples": 3, "retries": 0})
    assert (judgement.verdict, judgement.confidence, len(_Stub.bodies)) == ("success", 1.0, 3)


# --- routing -------------------------------------------------------------------------------------------------
def test_routing_by_the_judge_and_by_reward_or_judge_picks_the_episodes_computed_here(demo):
    project, task, manager = demo["project"], demo["task"], demo["manager"]
    ep = {name: make_finished_episode(project, task, steps=[{}], reward=reward) for name, reward in [
        ("paid_judged_ok", 1.0), ("unpaid_judged_ok", 0.0), ("unpaid_judged_bad", 0.0), ("no_reward_judged_bad", None),
        ("paid_judged_bad", 1.0), ("no_reward_unjudged", None), ("unpaid_no_verdict", 0.0), ("rejudged_ok", 1.0)]}
    judged(ep["paid_judged_ok"], SUCCESS_ANSWER)
    judged(ep["unpaid_judged_ok"], SUCCESS_ANSWER)
    judged(ep["unpaid_judged_bad"], FAILURE_ANSWER)
    judged(ep["no_reward_judged_bad"], FAILURE_ANSWER)
    judged(ep["paid_judged_bad"], FAILURE_ANSWER)
    judged(ep["unpaid_no_verdict"], "no idea")
    judged(ep["rejudged_ok"], FAILURE_ANSWER)
    judged(ep["rejudged_ok"], SUCCESS_ANSWER)  # the newest judgement is the one that counts

    def ids(*names):
        return {ep[n].pk for n in names}

    def routed(rule):
        buckets.routing_set(project=project, actor=manager, rule=rule)
        return ({e.pk for e in buckets.bucket_episodes(project, "sft")},
                {e.pk for e in buckets.bucket_episodes(project, "ct")})

    judge_ok = ids("paid_judged_ok", "unpaid_judged_ok", "rejudged_ok")
    judge_bad = ids("unpaid_judged_bad", "no_reward_judged_bad", "paid_judged_bad")
    assert routed("judge") == (judge_ok, judge_bad)
    assert routed("reward_or_judge") == (judge_ok | ids("paid_judged_bad"),
                                         ids("unpaid_judged_bad", "no_reward_judged_bad"))
    # the existing rules are unchanged: the reward alone
    assert routed("reward") == (ids("paid_judged_ok", "paid_judged_bad", "rejudged_ok"),
                                ids("unpaid_judged_ok", "unpaid_judged_bad", "no_reward_judged_bad",
                                    "no_reward_unjudged", "unpaid_no_verdict"))
    review_submit(episode=ep["paid_judged_ok"], reviewer=manager, verdict="accept")
    review_submit(episode=ep["unpaid_judged_ok"], reviewer=manager, verdict="reject")
    review_submit(episode=ep["paid_judged_bad"], reviewer=manager, verdict="accept")
    assert routed("judge_and_review") == (ids("paid_judged_ok"), judge_bad | ids("unpaid_judged_ok"))


def test_the_routing_api_offers_the_judge_rules_and_refuses_an_unknown_one(demo):
    client = client_for(demo["manager"])
    url = f"/api/v1/projects/{demo['project'].pk}/routing"
    assert client.patch(url, {"rule": "reward_or_judge"}, format="json").json()["rule"] == "reward_or_judge"
    refused = client.patch(url, {"rule": "vibes"}, format="json")
    assert refused.status_code == 400 and "rule" in refused.json()["errors"]
    with pytest.raises(ApplicationError, match="judge_and_review"):
        buckets.routing_set(project=demo["project"], actor=demo["manager"], rule="vibes")


# --- calibration ---------------------------------------------------------------------------------------------
def test_calibration_equals_the_agreement_kappa_and_confusion_worked_out_by_hand(demo):
    project, manager = demo["project"], demo["manager"]
    task_a, task_b = demo["task"], make_task(project, "click-link")
    answer = {"S": SUCCESS_ANSWER, "F": FAILURE_ANSWER, "?": "garbage"}
    # (task, judge, review): A: SS SS SF FF; B: FS FF FF; and a no-verdict and an unreviewed one left out
    for task, verdict, review in [(task_a, "S", "accept"), (task_a, "S", "accept"), (task_a, "S", "reject"),
                                  (task_a, "F", "reject"), (task_b, "F", "accept"), (task_b, "F", "reject"),
                                  (task_b, "F", "reject"), (task_a, "?", "accept"), (task_b, "S", None)]:
        episode = make_finished_episode(project, task, steps=[{}], reward=None)
        judged(episode, answer[verdict])
        if review:
            review_submit(episode=episode, reviewer=manager, verdict=review)
    # overall: n=7, agree 5; judge S=3 F=4, review S=3 F=4: pe = (9+16)/49, kappa = (5/7 - 25/49)/(24/49) = 10/24
    # task A: n=4, agree 3; judge S=3 F=1, review S=2 F=2: pe = 8/16, kappa = (3/4 - 1/2)/(1/2) = 0.5
    # task B: n=3, agree 2; judge F=3, review S=1 F=2: pe = 6/9, kappa = (2/3 - 2/3)/(1/3) = 0
    body = client_for(manager).get(f"/api/v1/projects/{project.pk}/judge/calibration").json()
    assert (body["judged"], body["no_verdict"], body["not_reviewed"]) == (9, 1, 1)
    assert (body["episodes"], body["agreement"], body["kappa"]) == (7, round(5 / 7, 4), round(10 / 24, 4))
    assert body["confusion"] == {"judge_success_review_accept": 2, "judge_success_review_reject": 1,
                                 "judge_failure_review_accept": 1, "judge_failure_review_reject": 3}
    tasks_ = {t["task"]: t for t in body["tasks"]}
    assert (tasks_["click-button"]["agreement"], tasks_["click-button"]["kappa"]) == (0.75, 0.5)
    assert (tasks_["click-link"]["agreement"], tasks_["click-link"]["kappa"]) == (round(2 / 3, 4), 0.0)
    assert tasks_["click-link"]["confusion"]["judge_failure_review_accept"] == 1


# --- settings, on demand, after finishing -----------------------------------------------------------------
@pytest.mark.parametrize("body, field", [
    ({"samples": 0}, "samples"), ({"samples": 16}, "samples"), ({"temperature": -1}, "temperature"),
    ({"backend": "oracle"}, "backend"), ({"backend": "openai"}, "model"), ({"backend": "scripted"}, "answers"),
    ({"enabled": "yes"}, "enabled"), ({"base_url": "ftp://x"}, "base_url"), ({"k": 3}, "k"),
])
def test_bad_judge_settings_are_refused_naming_the_setting(demo, body, field):
    response = client_for(demo["manager"]).patch(f"/api/v1/projects/{demo['project'].pk}/judge", body, format="json")
    assert response.status_code == 400 and field in response.json()["errors"], response.json()


def test_a_project_that_judges_every_episode_queues_a_judgement_when_one_finishes(demo, monkeypatch,
                                                                                 django_capture_on_commit_callbacks):
    ran = []
    monkeypatch.setattr(annotation_tasks.episode_judge, "delay", lambda *args: ran.append(annotation_tasks.episode_judge.apply(args=args)))
    client = client_for(demo["manager"])
    set_ = client.patch(f"/api/v1/projects/{demo['project'].pk}/judge",
                        {"enabled": True, "backend": "scripted", "answers": [SUCCESS_ANSWER, SUCCESS_ANSWER,
                                                                               FAILURE_ANSWER], "samples": 3},
                        format="json")
    assert set_.status_code == 200 and set_.json()["enabled"] is True
    with django_capture_on_commit_callbacks(execute=True):
        episode = make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=None)
    assert len(ran) == 1
    listed = client.get(f"/api/v1/episodes/{episode.pk}/judgements/").json()["results"]
    assert [(j["verdict"], j["confidence"], j["judge"]) for j in listed] == [("success", 0.67, "scripted")]
    client.patch(f"/api/v1/projects/{demo['project'].pk}/judge", {"enabled": False}, format="json")
    with django_capture_on_commit_callbacks(execute=True):
        make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=None)
    assert len(ran) == 1  # off: nothing queued


def test_a_manager_judges_a_filtered_set_on_demand_and_bad_requests_are_refused(demo, monkeypatch,
                                                                              django_capture_on_commit_callbacks):
    queued = []
    monkeypatch.setattr(annotation_tasks.episode_judge, "delay", lambda *args: queued.append(args))
    project, client = demo["project"], client_for(demo["manager"])
    other_task = make_task(project, "click-link")
    mine = [make_finished_episode(project, demo["task"], steps=[{}]) for _ in range(2)]
    make_finished_episode(project, other_task, steps=[{}])
    url = f"/api/v1/projects/{project.pk}/judgements/"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"filter": {"task": demo["task"].pk}}, format="json")
    assert response.status_code == 202 and sorted(response.json()["queued"]) == sorted(e.pk for e in mine)
    assert sorted(pk for pk, _ in queued) == sorted(e.pk for e in mine)
    assert {user for _, user in queued} == {demo["manager"].pk}
    assert client.post(url, {"filter": {"colour": "red"}}, format="json").status_code == 400
    assert client.post(url, {"episodes": [1], "filter": {}}, format="json").status_code == 400
    assert client.post(url, {"episodes": [999999]}, format="json").status_code == 404
    running = mine[0]
    running.status = "running"
    running.save(update_fields=["status"])
    refused = client.post(f"/api/v1/episodes/{running.pk}/judgements/")
    assert refused.status_code == 409 and "only finished episodes" in refused.json()["detail"]
    with pytest.raises(ApplicationError, match="only finished episodes"):
        judge.judge_episode(episode_id=running.pk)
