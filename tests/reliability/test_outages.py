"""Services going away under a running Loupe: PostgreSQL stopped and started again (private pgserver), Redis
stopped and started again during a live session (a private redis-server without persistence). Never the
machine's shared PostgreSQL or Redis."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
import websocket

from rollouts.models import Episode
from tests.reliability.live import (PrivatePostgres, PrivateRedis, Watcher, api, assert_acked_commands_stored_once,
                                    assert_saw_the_whole_log, scripted_project, wait_episodes_end)
from tests.stack import ROOT, ProcessStack, stack_env, start_daphne, start_together, start_worker, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SETUP = """
from django.contrib.auth import get_user_model
from rollouts.models import Episode
from projects.models import Membership, Project, TaskSpec
from webapp.auth import token_create
user = get_user_model().objects.create_user(username="outage", password="correct-horse-battery")
project = Project.objects.create(name="Outage", slug="outage")
Membership.objects.create(project=project, user=user, role="annotator")
task = TaskSpec.objects.create(project=project, task_name="click-button")
episode = Episode.objects.create(project=project, task=task, seed=1)
print("TOKEN", token_create(user=user)[1], episode.pk)
"""


def test_postgres_down_is_503_with_retry_after_and_everything_recovers(tmp_path):
    pg = PrivatePostgres()
    env = stack_env(DATABASE_URL=pg.url("loupe_outage"))
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], env=env, cwd=ROOT, check=True, timeout=300,
                   capture_output=True)
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", SETUP], env=env, cwd=ROOT, check=True,
                         timeout=120, capture_output=True, text=True).stdout
    _, token, episode_id = next(line for line in out.splitlines() if line.startswith("TOKEN")).split()
    stack = ProcessStack([], [])
    try:
        base = start_daphne(stack, tmp_path, env, name="daphne-pg")
        assert api(base, "GET", "/api/v1/auth/me", token)[0] == 200
        ws_url = base.replace("http", "ws") + f"/ws/episodes/{episode_id}/"
        pg.stop()
        for method, path, body in (("GET", "/api/v1/auth/me", None), ("GET", "/api/v1/projects/", None),
                                   ("POST", "/api/v1/auth/token", {"username": "outage", "password": "x"})):
            started = time.monotonic()
            status, headers, answer = api(base, method, path, token if body is None else None, body)
            assert status == 503, (path, status, answer)
            assert headers.get("Retry-After") == "5" and "unavailable" in answer["detail"], (path, headers, answer)
            assert time.monotonic() - started < 10, "a request waited on the dead database"
        status, _, health = api(base, "GET", "/api/v1/health")
        assert status == 503 and health["checks"]["database"]["ok"] is False
        # a socket is closed promptly with 4503 after an error saying why, never left hanging
        started = time.monotonic()
        ws = websocket.create_connection(ws_url, header=[f"Authorization: Bearer {token}"], timeout=15,
                                         suppress_origin=True)
        assert "database is unavailable" in ws.recv()
        opcode, data = ws.recv_data(control_frame=True)
        assert opcode == websocket.ABNF.OPCODE_CLOSE and int.from_bytes(data[:2], "big") == 4503
        assert time.monotonic() - started < 15
        pg.start()
        wait_for(lambda: api(base, "GET", "/api/v1/auth/me", token)[0] == 200, 60, interval=0.5,
                 what="the API to recover after PostgreSQL came back")
        ws = websocket.create_connection(ws_url, header=[f"Authorization: Bearer {token}"], timeout=15,
                                         suppress_origin=True)
        assert '"hello"' in ws.recv()
        ws.close()
        assert "Traceback" not in stack.tail(400), stack.tail(400)
    finally:
        stack.stop()
        pg.close()


def test_redis_restarted_during_a_live_session_loses_and_doubles_nothing(tmp_path):
    project, task, users, tokens = scripted_project("login-user", max_steps=8)
    stack = ProcessStack([], [])
    watchers: list[Watcher] = []
    try:
        redis = PrivateRedis(stack, tmp_path)
        env = stack_env(REDIS_URL=redis.url)
        base, _ = start_together(
            lambda: start_daphne(stack, tmp_path, env, name="daphne-redis"),
            lambda: start_worker(stack, tmp_path, env, queues="live,rollouts", name="rollouts-redis"))

        def start_episode(seed: int) -> int:  # through the API: the test process itself talks to another Redis
            status, _, body = api(base, "POST", f"/api/v1/projects/{project.pk}/episodes/", tokens[0],
                                  {"task": task.pk, "seeds": [seed], "mode": "supervised"})
            assert status == 201, body
            return body["results"][0]["id"]

        first = start_episode(5)
        watchers += [Watcher(base, first, tokens[0], approve=True, name="steer"),
                     Watcher(base, first, tokens[1], name="watch")]
        wait_for(lambda: any(m["type"] == "step.executed" for m in watchers[1].events), 180, what="a first step")
        redis.stop()
        down_at = Episode.objects.get(pk=first).n_steps
        time.sleep(8)  # the session goes on without Redis: commands by PostgreSQL NOTIFY, steps stored
        redis.start()
        wait_episodes_end([first], 300)
        episode = Episode.objects.get(pk=first)
        assert episode.status == "finished", (episode.status, episode.end_reason, stack.tail())
        assert episode.n_steps > down_at
        for watcher in watchers:
            assert_saw_the_whole_log(watcher, timeout=90)
        # the broker and the channel layer serve the next episode as before
        second = start_episode(6)
        watchers.append(Watcher(base, second, tokens[0], approve=True, name="steer-after"))
        wait_episodes_end([second], 300)
        assert Episode.objects.get(pk=second).status == "finished"
        assert_saw_the_whole_log(watchers[-1])
        assert assert_acked_commands_stored_once(watchers) >= 4
    finally:
        for watcher in watchers:
            watcher.close()
        stack.stop()
