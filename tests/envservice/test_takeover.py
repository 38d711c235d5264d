"""A person takes over an RL episode from the live session's WebSocket (real daphne), and the RL caller's step
answers with the person's steps: stored as theirs, the caller's action kept as the overridden proposal."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from agent.solvers import solve_step
from annotation.models import Command, Intervention
from envservice.client import EnvServiceClient, ServiceError, observation_of
from rollouts.models import Episode, EpisodeStatus, Rejection, Step
from projects.models import Role
from tests.annotation.test_live_session import Session
from tests.e2e.conftest import browser, login, page, screenshot  # noqa: F401 (the browser fixtures)
from tests.envservice.conftest import TASK
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import wait_for
from webapp.auth import token_create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

MODEL_ACTION = "Thought: the corner.\nAction: click(x=3, y=3)"


@pytest.fixture
def rl_project():
    project = make_project()
    make_task(project, TASK)
    job, person = make_user("rl-job"), make_user("ann")
    make_member(project, job, Role.MANAGER)
    make_member(project, person, Role.ANNOTATOR)
    return project, token_create(user=job)[1], person


def test_a_person_takes_over_the_rl_episode_and_the_rl_caller_gets_the_persons_steps(daphne_server, service,
                                                                                     rl_project):
    url, _ = service
    project, token, person = rl_project
    client = EnvServiceClient(url, token)
    lease = client.lease(project=project.pk, task=TASK, seed=3, run="rl-takeover")
    s = Session(daphne_server, lease["episode"], "ann")
    assert s.wait_type("hello")["data"]["role"] == "annotator"
    assert s.ack(s.send("takeover"))["type"] == "ack"  # applied when the RL job's next step comes

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.step, lease["lease"], MODEL_ACTION)  # waits while the person acts
        history = []
        for index in (0, 1):  # the person clicks the field and types the text, then hands back
            shown = s.wait_type("step.proposed", index=index)["data"]
            assert shown["reason"] == "takeover" and shown["action_text"] == "click(x=3, y=3)"
            turn = solve_step(TASK, observation_of(client.get(lease["lease"])["observation"]), history)
            history.append(turn)
            assert s.ack(s.send("act", action=turn.action.to_text(), thought=turn.thought))["type"] == "ack"
        s.wait_type("step.proposed", index=2)
        assert s.ack(s.send("handback"))["type"] == "ack"
        answer = waiting.result(timeout=120)

    assert answer["taken_over"] is True and [st["actor"] for st in answer["steps"]] == ["human", "human"]
    assert [st["action_text"] for st in answer["steps"]] == [t.action.to_text() for t in history]
    assert answer["index"] == 1 and not answer["done"]
    # the RL job acts on from the screen the person left: the submit button ends the episode
    last = solve_step(TASK, observation_of(answer["observation"]), history)
    done = client.step(lease["lease"], f"Action: {last.action.to_text()}")
    assert done["done"] and done["reward"] == pytest.approx(1.0, abs=0.01) and done["steps"][0]["actor"] == "model"
    s.ws.close()
    client.release(lease["lease"])  # its writes are flushed: the steps and the end are stored

    episode = Episode.objects.get(pk=lease["episode"])
    assert (episode.status, episode.rl_run, episode.env_reward) == (EpisodeStatus.FINISHED, "rl-takeover",
                                                                     done["reward"])
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [(st.actor, st.intervened_by_id) for st in steps] == [("human", person.pk), ("human", person.pk),
                                                                 ("model", None)]
    assert steps[0].proposal["action_text"] == "click(x=3, y=3)"  # the RL job's action, overridden
    kinds = list(Intervention.objects.filter(episode=episode).order_by("id").values_list("kind", flat=True))
    assert kinds == ["takeover", "act", "act", "handback"]


def test_a_person_takes_over_an_rl_episode_on_the_session_page_and_the_rl_job_records_their_click(
        daphne_server, service, page):
    url, _ = service
    project = make_project("RL run")
    make_task(project, "click-button")
    job, person = make_user("rl-job"), make_user("ann")
    make_member(project, job, Role.MANAGER)
    make_member(project, person, Role.ANNOTATOR)
    client = EnvServiceClient(url, token_create(user=job)[1])
    lease = client.lease(project=project.pk, task="click-button", seed=3, run="rl-browser")
    button = next(e for e in lease["observation"]["elements"] if e["role"] == "button")

    login(page, daphne_server, "ann", PASSWORD)
    page.get_by_test_id("current-user").wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/episodes/{lease['episode']}")
    assert page.get_by_test_id("episode-rl-run").inner_text() == "rl-browser"  # whose episode it is
    page.locator('[data-testid="connection-state"][data-state="open"]').wait_for(timeout=30_000)
    page.get_by_test_id("cmd-takeover").click()
    wait_for(lambda: Command.objects.filter(episode_id=lease["episode"], type="takeover").exists(), 30,
             what="the takeover to be stored")
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.step, lease["lease"], MODEL_ACTION)  # the RL job's step waits for the person
        page.get_by_test_id("cmd-handback").wait_for(timeout=60_000)
        image = page.get_by_test_id("episode-screenshot")
        image.wait_for(timeout=60_000)
        image.scroll_into_view_if_needed()
        box = image.bounding_box()
        width, height = lease["observation"]["width"], lease["observation"]["height"]
        image.click(position={"x": box["width"] * (button["x"] + 0.5) / width,
                              "y": box["height"] * (button["y"] + 0.5) / height})
        answer = waiting.result(timeout=120)
    screenshot(page, "envservice-takeover")

    assert answer["taken_over"] and answer["done"] and answer["reward"] == pytest.approx(1.0, abs=0.01)
    assert [s["actor"] for s in answer["steps"]] == ["human"]
    client.release(lease["lease"])
    wait_for(lambda: Episode.objects.get(pk=lease["episode"]).status == EpisodeStatus.FINISHED, 30,
             what="the episode to end")
    (step,) = Step.objects.filter(episode_id=lease["episode"])
    assert (step.actor, step.intervened_by_id, step.action["name"]) == ("human", person.pk, "click")
    assert page.errors == []


def test_a_person_pauses_the_rl_episode_rejects_the_jobs_action_and_approves_its_next(daphne_server, service,
                                                                                      rl_project):
    url, _ = service
    project, token, person = rl_project
    client = EnvServiceClient(url, token)
    lease = client.lease(project=project.pk, task=TASK, seed=3, run="rl-reject")
    s = Session(daphne_server, lease["episode"], "ann")
    s.wait_type("hello")
    assert s.ack(s.send("pause"))["type"] == "ack"

    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(client.step, lease["lease"], MODEL_ACTION)  # paused: the job's step waits
        assert s.wait_type("step.proposed", index=0)["data"]["action_text"] == "click(x=3, y=3)"
        assert s.ack(s.send("reject", index=0, reason="not the corner"))["type"] == "ack"
        with pytest.raises(ServiceError) as rejected:
            waiting.result(timeout=120)
    assert rejected.value.status == 409 and "not the corner" in rejected.value.detail
    stored = Rejection.objects.get(episode_id=lease["episode"], step_index=0)
    assert (stored.action_text, stored.reason, stored.rejected_by_id) == ("click(x=3, y=3)", "not the corner",
                                                                         person.pk)

    turn = solve_step(TASK, observation_of(client.get(lease["lease"])["observation"]), [])
    with ThreadPoolExecutor(1) as pool:  # still paused: the next action waits for the person's approval
        waiting = pool.submit(client.step, lease["lease"], f"Action: {turn.action.to_text()}")
        s.wait(lambda m: m["type"] == "step.proposed" and m["data"]["attempt"] == 2, "the second proposal")
        assert s.ack(s.send("approve", index=0))["type"] == "ack"
        answer = waiting.result(timeout=120)
    assert answer["steps"][0]["actor"] == "model" and answer["index"] == 0
    assert answer["steps"][0]["action_text"] == turn.action.to_text()

    with ThreadPoolExecutor(1) as pool:  # an edit decides the job's step, and the step answers with it
        waiting = pool.submit(client.step, lease["lease"], MODEL_ACTION)
        s.wait_type("step.proposed", index=1)
        typed = 'type(text="edited by a person")'
        assert s.ack(s.send("edit", index=1, action=typed, thought="I type it."))["type"] == "ack"
        edited = waiting.result(timeout=120)
    assert [(st["actor"], st["action_text"]) for st in edited["steps"]] == [("edited", typed)]
    s.ws.close()
    client.release(lease["lease"])
