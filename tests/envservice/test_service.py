"""The environment service over real HTTP: a threaded server in this process, real Chromium MiniWoB envs, the
test database, tokens as scripts use them."""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from agent.formats import render
from agent.solvers import solve_step
from envservice.client import EnvServiceClient, ServiceError, observation_of
from rollouts.models import Episode, EpisodeStatus, Step
from projects.models import Role
from tests.envservice.conftest import TASK
from tests.factories import make_member, make_project, make_task, make_user
from webapp.auth import token_create

pytestmark = pytest.mark.django_db(transaction=True)


def play(client: EnvServiceClient, lease: dict, task: str = TASK, fmt: str = "loupe") -> dict:
    """Play the lease's episode with the scripted solver, its turns written in ``fmt``, through the service; the last
    step's answer."""
    obs, history, step = observation_of(lease["observation"]), [], None
    for _ in range(10):
        turn = solve_step(task, obs, history)
        history.append(turn)
        text = render(turn.thought, turn.action, format=fmt, width=obs.width, height=obs.height)
        step = client.step(lease["lease"], text, format=None if fmt == "loupe" else fmt)
        obs = observation_of(step["observation"])
        if step["done"]:
            return step
    raise AssertionError(f"the solver did not finish {task} in 10 steps: {step}")


def test_four_leases_at_once_play_the_task_to_reward_1_each_an_episode_with_its_steps_marked_with_the_run(
        service, manager_token):
    url, svc = service
    project, token = manager_token
    client = EnvServiceClient(url, token)

    def lease_and_play(seed: int):
        lease = client.lease(project=project.pk, task=TASK, seed=seed, run="grpo-enter-text-1")
        step = play(client, lease)
        client.release(lease["lease"])
        return lease, step

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lease_and_play, range(4)))
    assert len({lease["lease"] for lease, _ in results}) == 4
    for lease, step in results:
        assert step["reward"] == pytest.approx(1.0, abs=0.01)
        episode = Episode.objects.get(pk=lease["episode"])
        assert (episode.status, episode.project_id, episode.env_reward) == (EpisodeStatus.FINISHED, project.pk,
                                                                             step["reward"])
        steps = list(Step.objects.filter(episode=episode).order_by("index"))
        assert [s.index for s in steps] == list(range(step["index"] + 1)) and len(steps) >= 2
        assert steps[-1].done and steps[-1].reward == step["reward"] and all(s.screenshot for s in steps)
        assert steps[0].action["name"] == "click" and steps[0].instruction == lease["observation"]["instruction"]
    assert svc.status()["pools"][0]["leased"] == 0
    # the run's episodes are listed like any other, found by the run's name
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    listed = api.get("/api/v1/episodes/", {"project": project.pk, "rl_run": "grpo-enter-text-1"}).json()["results"]
    assert sorted(e["id"] for e in listed) == sorted(lease["episode"] for lease, _ in results)
    assert {e["rl_run"] for e in listed} == {"grpo-enter-text-1"}
    assert api.get("/api/v1/episodes/", {"project": project.pk, "rl_run": "another"}).json()["results"] == []


def test_a_bad_action_is_a_plain_400_stored_void_and_a_crashed_env_is_replaced(service, manager_token):
    url, svc = service
    project, token = manager_token
    client = EnvServiceClient(url, token)
    lease = client.lease(project=project.pk, task=TASK, seed=5)

    with pytest.raises(ServiceError) as bad:
        client.step(lease["lease"], "Thought: hm\nAction: clack(x=1)")
    assert bad.value.status == 400 and "could not be read" in bad.value.detail and "clack" in bad.value.detail
    void = Step.objects.get(episode_id=lease["episode"], index=0)
    assert void.void and void.action is None and "clack" in void.raw_output

    live = svc._leases[lease["lease"]]
    pid = live.actor.call(lambda env: env.browser_pid, timeout=30)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ServiceError) as crashed:
        client.step(lease["lease"], "Action: click(x=10, y=10)")
    assert crashed.value.status == 502 and "replaced" in crashed.value.detail
    old = Episode.objects.get(pk=lease["episode"])
    assert old.status == EpisodeStatus.FAILED and "crashed" in old.end_reason
    fresh = client.get(lease["lease"])
    assert fresh["episode"] != old.pk and fresh["index"] == 0 and fresh["seed"] == 5
    # the fresh env plays on, here in UI-TARS's format (pixels of its resized image), read into Loupe's actions
    assert play(client, fresh, fmt="uitars")["reward"] == pytest.approx(1.0, abs=0.01)
    assert svc.status()["pools"][0]["crashes"] == 1
    client.release(lease["lease"])  # its writes are flushed: the last step is stored
    assert Step.objects.filter(episode_id=fresh["episode"], action_format="uitars").count() >= 2


def test_refusals_are_plain_json_403_without_the_project_404_unknown_task_410_expired_and_leases_heartbeat(
        service, manager_token):
    url, svc = service
    project, token = manager_token
    other = make_project()
    make_task(other, TASK)
    with pytest.raises(ServiceError) as refused:
        EnvServiceClient(url, token).lease(project=other.pk, task=TASK)
    assert refused.value.status == 403 and f"project {other.pk}" in refused.value.detail
    annotator = make_user()
    make_member(project, annotator, Role.ANNOTATOR)
    with pytest.raises(ServiceError) as low:
        EnvServiceClient(url, token_create(user=annotator)[1]).lease(project=project.pk, task=TASK)
    assert low.value.status == 403 and "manager" in low.value.detail
    client = EnvServiceClient(url, token)
    with pytest.raises(ServiceError) as unknown:
        client.lease(project=project.pk, task="no-such-task")
    assert unknown.value.status == 404 and TASK in unknown.value.detail  # names the tasks there are
    with pytest.raises(ServiceError) as bad_token:
        EnvServiceClient(url, "not-a-token").status()
    assert bad_token.value.status == 401

    lease = client.lease(project=project.pk, task=TASK, seed=1)
    long_ago = timezone.now() - timedelta(hours=1)
    Episode.objects.filter(pk=lease["episode"]).update(heartbeat_at=long_ago)
    svc.heartbeat()  # the reaper's sweep: a caller thinking between steps is not a dead worker to beat's sweep
    assert Episode.objects.get(pk=lease["episode"]).heartbeat_at > long_ago
    svc.lease_timeout = 0.5  # the caller goes quiet: the reaper takes the lease back
    deadline = time.monotonic() + 30
    while lease["lease"] in svc._leases and time.monotonic() < deadline:
        time.sleep(0.2)
    with pytest.raises(ServiceError) as expired:
        client.step(lease["lease"], "Action: click(x=10, y=10)")
    assert expired.value.status == 410 and "no call for" in expired.value.detail
    episode = Episode.objects.get(pk=lease["episode"])
    assert episode.status == EpisodeStatus.INTERRUPTED and "lease ended" in episode.end_reason


def test_the_schema_lists_the_operations_and_an_unknown_path_is_a_json_404(service, manager_token):
    url, _ = service
    schema = EnvServiceClient(url, manager_token[1]).schema()
    assert {"/v1/leases", "/v1/leases/{lease_id}/step", "/v1/leases/{lease_id}/reset",
            "/v1/leases/{lease_id}"} <= set(schema["paths"])
    with pytest.raises(ServiceError) as nowhere:
        EnvServiceClient(url, manager_token[1])._call("GET", "/v1/nowhere")
    assert nowhere.value.status == 404 and "/openapi.json" in nowhere.value.detail  # plain JSON, not Django's page
