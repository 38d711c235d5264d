"""Think-aloud polished into thoughts (annotation/polish.py): the cleanup polisher, the openai one against a stub
server that answers garbage, nothing or too late, the hook where aligned words land, the real worker, and the REST
API with its permissions and bad requests."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rest_framework.test import APIClient

from annotation import audio
from annotation.models import AudioClip, TranscriptWord
from core.models import AuditEntry
from annotation import polish
from rollouts.events import event_append
from rollouts.models import Episode, Event, PolishState, Step
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user
from tests.stack import wait_for

SPOKEN = "um so I think the the submit button is uh at the bottom"


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


# --- the cleanup polisher --------------------------------------------------------------------------------------
@pytest.mark.parametrize("said, thought", [
    (SPOKEN, "I think the submit button is at the bottom."),
    ("Okay so, I need to cl- I need to click the first field, you know, the user name one",
     "I need to click the first field, the user name one."),
    ("i'll type the name. uh. then i press enter", "I'll type the name. Then I press enter."),
    ("Um, the blue one. Um.", "The blue one."),
    ("I want, I want to click okay", "I want to click okay."),
    ("so I mean, the second link is what I want", "The second link is what I want."),
    ("Is it the last row?", "Is it the last row?"),
])
def test_cleanup_drops_fillers_false_starts_and_repeats_and_keeps_the_first_person(said, thought):
    assert polish.cleanup(said) == thought


def test_cleanup_of_only_fillers_is_nothing_and_of_a_huge_text_is_capped():
    assert polish.cleanup("um uh, hmm. Uh") == "" and polish.cleanup("   ") == ""
    huge = " ".join(f"I look at row {i} of the table." for i in range(2000))
    thought = polish.cleanup(huge)
    assert len(thought) <= polish.MAX_THOUGHT_CHARS and thought.endswith(".") and thought.startswith("I look at row 0")


@pytest.mark.parametrize("answer, why", [
    ("", "the model answered nothing"),
    ("   \n", "the model answered nothing"),
    ("Sure! Here is a thought for you.", "does not start with 'Thought:'"),
    ("Thought:   \nAction: click(x=1, y=2)", "wrote 'Thought:' and nothing after it"),
    ("Thought: " + "very " * 400, "characters long"),
])
def test_a_model_answer_out_of_format_fails_saying_why(answer, why):
    with pytest.raises(polish.PolishFailed, match=why):
        polish.parse_thought(answer)


def test_a_model_answer_in_format_is_read_and_an_action_line_after_it_dropped():
    assert polish.parse_thought("thought: The submit button is\nlow.\nAction: click(x=1, y=2)") == \
        "The submit button is low."


# --- the openai polisher against a stub server -----------------------------------------------------------------
class _Stub(BaseHTTPRequestHandler):
    answer = ""
    delay = 0.0
    bodies: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        time.sleep(type(self).delay)
        reply = json.dumps({"model": body["model"], "choices": [{"message": {"content": type(self).answer}}]}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the polisher gave up waiting

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    _Stub.bodies, _Stub.delay = [], 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def spoken_step(project, task, words: str = SPOKEN, **spec) -> Step:
    episode = make_finished_episode(project, task, mode="supervised", steps=[
        {"actor": "human", "thought": "", "human_thought": words, **spec}, {}])
    step = episode.steps.get(index=0)
    Step.objects.filter(pk=step.pk).update(polish_state=PolishState.QUEUED)
    return step


@pytest.mark.django_db
def test_an_openai_polisher_that_answers_garbage_nothing_or_too_late_fails_the_step_saying_why(demo, stub_server):
    project, manager = demo["project"], demo["manager"]
    polish.polish_settings_set(project=project, actor=manager, changes={
        "backend": "openai", "model": "polisher", "base_url": stub_server, "timeout_seconds": 1, "retries": 0})
    step = spoken_step(project, demo["task"])
    for answer, delay, why in (("Sure, happy to help!", 0, "does not start with 'Thought:'"),
                               ("", 0, "the model answered nothing"),
                               ("Thought: too late", 2.0, "the model could not be asked")):
        _Stub.answer, _Stub.delay = answer, delay
        Step.objects.filter(pk=step.pk).update(polish_state=PolishState.QUEUED)
        started = time.monotonic()
        assert polish.step_polish(step_id=step.pk).startswith("failed")
        assert time.monotonic() - started < 5
        step.refresh_from_db()
        assert (step.polish_state, step.polished_thought) == (PolishState.FAILED, "")
        assert why in step.polish_error and step.human_thought == SPOKEN  # the raw words are never touched
    sent = _Stub.bodies[0]
    assert sent["model"] == "polisher" and sent["messages"][0]["content"] == polish.POLISH_SYSTEM
    assert f'What the person said: "{SPOKEN}"' in sent["messages"][1]["content"]
    assert "Action taken at this step: click(" in sent["messages"][1]["content"]

    _Stub.answer, _Stub.delay = "Thought: The submit button is at the bottom, so I click it.", 0
    Step.objects.filter(pk=step.pk).update(polish_state=PolishState.QUEUED)
    assert polish.step_polish(step_id=step.pk) == "done"
    step.refresh_from_db()
    assert (step.polish_state, step.polished_thought, step.polish_error, step.polish_source) == (
        PolishState.DONE, "The submit button is at the bottom, so I click it.", "", SPOKEN)


@pytest.mark.django_db
def test_only_fillers_fail_without_asking_the_model(demo, stub_server):
    polish.polish_settings_set(project=demo["project"], actor=demo["manager"], changes={
        "backend": "openai", "model": "polisher", "base_url": stub_server, "retries": 0})
    step = spoken_step(demo["project"], demo["task"], words="um uh hmm")
    assert polish.step_polish(step_id=step.pk).startswith("failed")
    step.refresh_from_db()
    assert step.polish_state == PolishState.FAILED and "only filler words were said" in step.polish_error
    assert _Stub.bodies == []


# --- the task's service: idempotent, never over an edit, never with stale words -----------------------------------
@pytest.mark.django_db
def test_polishing_twice_changes_nothing_and_an_edit_or_newer_words_are_never_overwritten(demo, monkeypatch):
    step = spoken_step(demo["project"], demo["task"])
    assert polish.step_polish(step_id=step.pk) == "done"
    assert polish.step_polish(step_id=step.pk) == "done already"
    step.refresh_from_db()
    assert step.polished_thought == "I think the submit button is at the bottom."

    # the words change while the polisher works: what it wrote is dropped (the newer words' polish is queued)
    real = polish.CleanupPolisher.polish

    def slow(self, words, **kw):
        Step.objects.filter(pk=step.pk).update(human_thought=words + " and then the OK button")
        return real(self, words, **kw)

    monkeypatch.setattr(polish.CleanupPolisher, "polish", slow)
    Step.objects.filter(pk=step.pk).update(polish_state=PolishState.QUEUED)
    assert polish.step_polish(step_id=step.pk).startswith("stale")
    monkeypatch.setattr(polish.CleanupPolisher, "polish", real)

    step.refresh_from_db()
    edited = polish.step_polish_edit(step=step, user=demo["manager"], role="manager", text="  I press  submit. ")
    assert (edited.polish_state, edited.polished_thought) == (PolishState.EDITED, "I press submit.")
    assert polish.step_polish(step_id=step.pk) == "edited: kept"
    polish.step_human_thought_set(step=edited, text="new words said later")  # the audio hook: the edit stands
    edited.refresh_from_db()
    assert (edited.polish_state, edited.polished_thought) == (PolishState.EDITED, "I press submit.")
    assert polish.step_polish_payload(edited, can_edit=True)["stale"] is True


# --- the hook where aligned words land -------------------------------------------------------------------------
def _say(episode, user, words_at: list[tuple[str, float]]) -> None:
    clip = AudioClip.objects.create(episode=episode, user=user, client_id=f"c{episode.pk}", content_type="audio/webm",
                                    started_at=0.0)
    TranscriptWord.objects.bulk_create([TranscriptWord(clip=clip, position=i, word=w, start=t, end=t + 0.3)
                                        for i, (w, t) in enumerate(words_at)])


@pytest.mark.django_db(transaction=True)
def test_words_aligned_to_steps_a_person_acted_on_or_approved_are_polished_by_the_worker(celery_worker):
    project, annotator = make_project(), make_user()
    make_member(project, annotator)
    episode = Episode.objects.create(project=project, task=make_task(project), seed=1, mode="supervised")
    running = event_append(episode_id=episode.pk, type="episode.state", payload={"status": "running"})
    steps = [Step.objects.create(episode=episode, index=0, actor="human", action_text="click(x=1, y=2)"),
             Step.objects.create(episode=episode, index=1, actor="model", intervened_by=annotator,
                                 thought="I open the menu", action_text="click(x=3, y=4)"),  # approved
             Step.objects.create(episode=episode, index=2, actor="model", thought="scrolling", action_text="wait()")]
    marks = [running] + [event_append(episode_id=episode.pk, type="step.executed", payload={"index": i})
                         for i in range(3)]
    from datetime import datetime, timezone as tz
    for event, at in zip(marks, (1000, 1010, 1020, 1030)):
        Event.objects.filter(pk=event.pk).update(created_at=datetime.fromtimestamp(at, tz.utc))
    _say(episode, annotator, [("um", 1001), ("the", 1002), ("the", 1003), ("login", 1004), ("link", 1005),
                              ("okay", 1011), ("menu", 1012), ("first", 1013), ("uh", 1021), ("nothing", 1022)])

    audio.words_align(episode_id=episode.pk)
    wait_for(lambda: set(Step.objects.filter(episode=episode, index__lt=2).values_list("polish_state", flat=True))
             == {PolishState.DONE}, 60, interval=0.3, what="both steps polished by the worker")
    human, approved, autonomous = (Step.objects.get(pk=s.pk) for s in steps)
    assert (human.human_thought, human.polished_thought) == ("um the the login link", "The login link.")
    assert (approved.human_thought, approved.polished_thought) == ("okay menu first", "Menu first.")
    assert (autonomous.human_thought, autonomous.polish_state) == ("", "")  # nobody acted on it: transcript only
    assert autonomous.transcript_words.count() == 2


# --- the REST API ----------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_api_shows_progress_lets_the_steps_annotator_and_managers_edit_and_refuses_others(demo):
    project, task, annotator, manager = demo["project"], demo["task"], demo["annotator"], demo["manager"]
    other_annotator = make_user("ann2")
    make_member(project, other_annotator)
    episode = make_finished_episode(project, task, mode="supervised", created_by=annotator, steps=[
        {"actor": "human", "thought": "", "human_thought": SPOKEN}, {"actor": "edited", "human_thought": "um uh"},
        {}])
    for index in (0, 1):
        Step.objects.filter(episode=episode, index=index).update(polish_state=PolishState.QUEUED)
        polish.step_polish(step_id=episode.steps.get(index=index).pk)
    url = f"/api/v1/episodes/{episode.pk}"

    def edit(user, index: int, text: str):
        return client_for(user).patch(f"{url}/steps/{index}/polish", {"polished_thought": text}, format="json")

    shown = client_for(annotator).get(f"{url}/polish").json()
    assert shown["progress"] == {"steps_with_words": 2, "done": 1, "edited": 0, "queued": 0, "failed": 1,
                                 "not_polished": 0}
    first, second = shown["steps"]
    assert (first["words"], first["polished_thought"], first["polish_state"], first["can_edit"]) == (
        SPOKEN, "I think the submit button is at the bottom.", "done", True)
    assert second["polish_state"] == "failed" and "only filler words" in second["polish_error"]
    detail = client_for(manager).get(f"{url}/").json()["steps"][0]
    assert (detail["human_thought"], detail["polished_thought"], detail["polish_state"]) == (
        SPOKEN, "I think the submit button is at the bottom.", "done")

    edited = edit(annotator, 0, "The submit button is low.")
    assert edited.status_code == 200 and edited.json()["polish_state"] == "edited"
    entry = AuditEntry.objects.get(action="step.polish_edit")
    assert (entry.actor, entry.data["after"], entry.data["step"]) == (annotator, "The submit button is low.", 0)
    assert edit(manager, 0, "x").status_code == 200

    refused = edit(other_annotator, 0, "mine")
    assert refused.status_code == 403 and "the annotator who worked on this step" in refused.json()["detail"]
    assert client_for(other_annotator).get(f"{url}/polish").json()["steps"][0]["can_edit"] is False
    outsider = edit(demo["outsider"], 0, "x")
    assert outsider.status_code == 404  # another project's people do not learn the episode exists
    too_long = edit(manager, 0, "a" * 1001)
    assert too_long.status_code == 400 and too_long.json()["detail"]
    no_words = edit(manager, 2, "x")
    assert no_words.status_code == 400 and "Nobody said anything during step 3" in no_words.json()["detail"]
    assert edit(manager, 9, "x").status_code == 404
    assert Step.objects.get(episode=episode, index=0).polished_thought == "x"


@pytest.mark.django_db
def test_polishing_again_a_step_twice_queues_it_once_and_an_episode_without_words_is_refused(
        demo, django_capture_on_commit_callbacks):
    project, task, manager = demo["project"], demo["task"], demo["manager"]
    episode = make_finished_episode(project, task, mode="supervised", created_by=demo["annotator"],
                                    steps=[{"actor": "human", "thought": "", "human_thought": SPOKEN}])
    url = f"/api/v1/episodes/{episode.pk}"
    with django_capture_on_commit_callbacks() as sent:
        first = client_for(manager).post(f"{url}/steps/0/polish")
        second = client_for(manager).post(f"{url}/steps/0/polish")
    assert (first.status_code, first.json()["queued_now"], first.json()["polish_state"]) == (202, True, "queued")
    assert (second.status_code, second.json()["queued_now"]) == (202, False)
    assert len(sent) == 1
    assert client_for(manager).post(f"{url}/polish").status_code == 202  # the episode: every step with words

    silent = make_finished_episode(project, task, steps=[{}, {}])
    refused = client_for(manager).post(f"/api/v1/episodes/{silent.pk}/polish")
    assert refused.status_code == 400 and "Nobody said anything during episode" in refused.json()["detail"]
    step_refused = client_for(manager).post(f"/api/v1/episodes/{silent.pk}/steps/0/polish")
    assert step_refused.status_code == 400 and "nothing to polish" in step_refused.json()["detail"]
    assert client_for(demo["annotator"]).post(f"{url}/polish").status_code == 403  # the whole episode: managers


@pytest.mark.django_db
@pytest.mark.parametrize("body, field", [({"backend": "gpt"}, "backend"), ({"backend": "openai"}, "model"),
                                         ({"timeout_seconds": 0}, "timeout_seconds"), ({"colour": 1}, "colour"),
                                         ({"enabled": "yes"}, "enabled"), ({"model": "a\x00b"}, "model")])
def test_bad_polish_settings_are_refused_naming_the_setting(demo, body, field):
    response = client_for(demo["manager"]).patch(f"/api/v1/projects/{demo['project'].pk}/polish", body, format="json")
    assert response.status_code == 400 and field in response.json()["detail"]
