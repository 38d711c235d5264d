"""Who may do what, for every REST endpoint and the live-session socket, from one table.

The endpoints are read from the URL resolver (and checked against the OpenAPI schema), so an endpoint
someone adds later fails here until it has a row in ``TABLE``; a row whose endpoint is gone fails too.
Each endpoint is called by every role against a fresh project, through real bearer tokens; each role's
call runs in a savepoint that is rolled back, so one role's write cannot change what the next sees.

Roles: ``anonymous``; ``outsider`` (an *admin of another project*: every right there, none here);
``annotator``, ``manager`` and ``admin`` of the project the ids belong to.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Callable

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from tests.factories import PASSWORD
from tests.webapp.world import MARKER, World, checkpoint_dir, webm_chunk  # noqa: F401 (fixtures)

ROLES = ("anonymous", "outsider", "annotator", "manager", "admin")


def _row(anonymous, outsider, annotator, manager, admin) -> dict:
    return dict(zip(ROLES, (anonymous, outsider, annotator, manager, admin)))


def public(ok) -> dict:
    """Open to everyone (login, health, schema)."""
    return _row(ok, ok, ok, ok, ok)


def signed_in(ok) -> dict:
    """Any logged-in user; the answer holds only what they may see."""
    return _row(401, ok, ok, ok, ok)


def members(ok) -> dict:
    return _row(401, 404, ok, ok, ok)


def managers(ok) -> dict:
    return _row(401, 404, 403, ok, ok)


def admins(ok) -> dict:
    return _row(401, 404, 403, 403, ok)


def recorder(ok) -> dict:
    """Only the annotator who recorded the clip may upload to it or finish it."""
    return _row(401, 404, ok, 403, 403)


@dataclass
class Call:
    expected: dict
    body: Callable | None = None            # world -> JSON body
    raw: Callable | None = None             # world -> (bytes, content type, extra headers)
    ids: dict = field(default_factory=dict)  # path parameter -> World attribute, where not the same name


def _multipart(fields: dict) -> tuple[bytes, str, dict]:
    """A multipart form body (a file is a (name, bytes) pair) for Call.raw."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart

    data = {key: SimpleUploadedFile(*value) if isinstance(value, tuple) else value for key, value in fields.items()}
    return encode_multipart(BOUNDARY, data), MULTIPART_CONTENT, {}


SESSION_LOGIN = Call(public(200), body=lambda w: {"username": w.users["annotator"].username, "password": PASSWORD})

TABLE: dict[str, Call] = {
    # --- accounts and the service ---
    "GET /api/v1/openapi.json": Call(public(200)),
    "GET /api/v1/health": Call(public(503)),  # no Celery worker runs in this test: degraded, for everyone alike
    # the site's staff only (tests/envservice/test_status.py): a project admin is not staff
    "GET /api/v1/envservice/hosts": Call(_row(401, 403, 403, 403, 403)),
    "GET /api/v1/auth/session": Call(signed_in(200)),
    "POST /api/v1/auth/session": SESSION_LOGIN,
    "DELETE /api/v1/auth/session": Call(public(204)),
    "POST /api/v1/auth/token": Call(public(201), body=SESSION_LOGIN.body),
    "DELETE /api/v1/auth/token": Call(signed_in(204)),  # revokes the token it is sent with
    "GET /api/v1/auth/me": Call(signed_in(200)),
    # --- projects, members, tasks ---
    "GET /api/v1/projects/": Call(signed_in(200)),
    "GET /api/v1/projects/<int:project_id>/": Call(members(200)),
    "PATCH /api/v1/projects/<int:project_id>/": Call(managers(200), body=lambda w: {"description": "changed"}),
    "GET /api/v1/projects/<int:project_id>/members/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/members/": Call(
        admins(201), body=lambda w: {"username": w.users["newcomer"].username, "role": "annotator"}),
    "PATCH /api/v1/projects/<int:project_id>/members/<int:member_id>/": Call(admins(200), body=lambda w: {"role": "manager"}),
    "DELETE /api/v1/projects/<int:project_id>/members/<int:member_id>/": Call(admins(204)),
    "GET /api/v1/projects/<int:project_id>/tasks/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/tasks/": Call(managers(201), body=lambda w: {"task_name": "click-link"}),
    "PATCH /api/v1/projects/<int:project_id>/tasks/<int:task_id>/": Call(managers(200), body=lambda w: {"max_steps": 5}),
    "DELETE /api/v1/projects/<int:project_id>/tasks/<int:task_id>/": Call(managers(204)),
    "POST /api/v1/projects/<int:project_id>/tasks/import": Call(managers(201), body=lambda w: {
        "format": "webarena",
        "tasks": [{"task_id": "matrix-app", "start_url": "http://127.0.0.1:9/", "instruction": "Open it.",
                   "check": {"type": "person"}}]}),
    # no ?format= here: managers get the 400 that asks for one, everyone else what the role allows
    "GET /api/v1/projects/<int:project_id>/tasks/export": Call(_row(401, 404, 403, 400, 400)),
    "GET /api/v1/tasks/catalogue": Call(signed_in(200)),
    "GET /api/v1/projects/<int:project_id>/tasks/files": Call(managers(200)),
    "POST /api/v1/projects/<int:project_id>/tasks/files": Call(managers(201), raw=lambda w: _multipart(
        {"url": "https://example.com/gold.xlsx", "file": ("gold.xlsx", b"bytes")})),
    "DELETE /api/v1/projects/<int:project_id>/tasks/files/<int:file_id>": Call(managers(204)),
    # --- episodes ---
    "GET /api/v1/episodes/": Call(signed_in(200)),
    "POST /api/v1/projects/<int:project_id>/episodes/": Call(
        members(201), body=lambda w: {"task": w.train_task.pk, "seeds": [5], "mode": "supervised"}),
    "GET /api/v1/episodes/<int:episode_id>/": Call(members(200)),
    "GET /api/v1/episodes/<int:episode_id>/neighbours": Call(members(200)),
    "POST /api/v1/episodes/<int:episode_id>/resume": Call(members(202), ids={"episode_id": "interrupted_episode_id"}),
    "GET /api/v1/episodes/<int:episode_id>/branch": Call(members(200)),
    "POST /api/v1/episodes/<int:episode_id>/branch": Call(members(201), body=lambda w: {"step": 1, "mode": "supervised"}),
    "GET /api/v1/episodes/<int:episode_id>/compare": Call(managers(200), ids={"episode_id": "branch_episode_id"}),
    "GET /api/v1/episodes/<int:episode_id>/steps/<int:index>/screenshot": Call(members(200)),
    # what redaction hid: admins only (404 here: this project keeps no originals; tests/core/test_redaction_stored)
    "POST /api/v1/episodes/<int:episode_id>/steps/<int:index>/original": Call(
        _row(401, 404, 403, 403, 404), body=lambda w: {"reason": "x"}),
    "GET /api/v1/episodes/<int:episode_id>/proposals/<int:index>/screenshot": Call(members(200)),
    # --- deployments, runs, routing, snapshots ---
    "GET /api/v1/projects/<int:project_id>/checkpoints/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/checkpoints/": Call(
        admins(201), body=lambda w: {"name": "registered", "uri": str(w.checkpoint_dir), "action_format": "uitars"}),
    "GET /api/v1/projects/<int:project_id>/deployments/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/deployments/<int:deployment_id>/rollback": Call(
        managers(200), ids={"deployment_id": "earlier_deployment_id"}),
    "GET /api/v1/projects/<int:project_id>/runs/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/runs/": Call(managers(202), body=lambda w: {"snapshot": w.snapshot_id}),
    "GET /api/v1/projects/<int:project_id>/routing": Call(managers(200)),
    "PATCH /api/v1/projects/<int:project_id>/routing": Call(managers(200), body=lambda w: {"reward_threshold": 0.5}),
    "GET /api/v1/projects/<int:project_id>/snapshots/": Call(managers(200)),
    "POST /api/v1/projects/<int:project_id>/snapshots/": Call(managers(202), body=lambda w: {"kind": "sft"}),
    "GET /api/v1/snapshots/<int:snapshot_id>/": Call(managers(200)),
    "GET /api/v1/snapshots/<int:snapshot_id>/rows": Call(managers(200)),
    "GET /api/v1/snapshots/<int:snapshot_id>/export": Call(managers(200)),
    "POST /api/v1/snapshots/<int:snapshot_id>/export-unredacted": Call(admins(200), body=lambda w: {"reason": "x"}),
    # --- the judge ---
    "GET /api/v1/projects/<int:project_id>/judge": Call(managers(200)),
    "PATCH /api/v1/projects/<int:project_id>/judge": Call(managers(200), body=lambda w: {"samples": 3}),
    "GET /api/v1/projects/<int:project_id>/judge/calibration": Call(managers(200)),
    "GET /api/v1/projects/<int:project_id>/asking": Call(members(200)),
    "PATCH /api/v1/projects/<int:project_id>/asking": Call(managers(200), body=lambda w: {"ask_below": 0.5}),
    "GET /api/v1/projects/<int:project_id>/asking/calibration": Call(managers(200)),
    "GET /api/v1/projects/<int:project_id>/asks": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/judgements/": Call(managers(202), body=lambda w: {"episodes": [w.episode_id]}),
    "GET /api/v1/episodes/<int:episode_id>/judgements/": Call(managers(200)),
    "POST /api/v1/episodes/<int:episode_id>/judgements/": Call(managers(202)),
    # --- think-aloud polished into thoughts: a step's polished thought is the managers' and the step's annotator's
    # (here the episode's creator); re-polishing a whole episode is the managers' ---
    "GET /api/v1/projects/<int:project_id>/polish": Call(managers(200)),
    "PATCH /api/v1/projects/<int:project_id>/polish": Call(managers(200), body=lambda w: {"enabled": False}),
    "GET /api/v1/episodes/<int:episode_id>/polish": Call(members(200)),
    "POST /api/v1/episodes/<int:episode_id>/polish": Call(managers(202)),
    "PATCH /api/v1/episodes/<int:episode_id>/steps/<int:index>/polish": Call(
        members(200), body=lambda w: {"polished_thought": "The first one."}),
    "POST /api/v1/episodes/<int:episode_id>/steps/<int:index>/polish": Call(members(202)),
    # --- cycles ---
    "GET /api/v1/projects/<int:project_id>/cycles/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/cycles/": Call(managers(202)),
    "GET /api/v1/projects/<int:project_id>/cycle-settings": Call(members(200)),
    "PATCH /api/v1/projects/<int:project_id>/cycle-settings": Call(managers(200), body=lambda w: {"margin": 0.1}),
    "GET /api/v1/cycles/<int:cycle_id>/": Call(members(200)),
    "POST /api/v1/cycles/<int:cycle_id>/approve": Call(managers(200)),
    "POST /api/v1/cycles/<int:cycle_id>/reject": Call(managers(200), body=lambda w: {"reason": "not now"}),
    # --- think-aloud audio ---
    "POST /api/v1/episodes/<int:episode_id>/audio/": Call(
        members(201), body=lambda w: {"client_id": "matrix-clip-2", "content_type": "audio/webm", "started_at": 10.0}),
    "GET /api/v1/episodes/<int:episode_id>/transcript": Call(members(200)),
    "GET /api/v1/audio/<int:clip_id>/": Call(members(200)),
    # re-sending the stored chunk 0 is the idempotent 200
    "PUT /api/v1/audio/<int:clip_id>/chunks/<int:index>": Call(
        recorder(200), raw=lambda w: (w.webm, "audio/webm", {"HTTP_X_CHUNK_START": "10.0"})),
    "POST /api/v1/audio/<int:clip_id>/finish": Call(recorder(202)),
    "GET /api/v1/audio/<int:clip_id>/file": Call(members(200)),
    # --- reviews and dashboards ---
    "GET /api/v1/episodes/<int:episode_id>/reviews/": Call(managers(200)),
    "PUT /api/v1/episodes/<int:episode_id>/review": Call(managers(200), body=lambda w: {"verdict": "accept", "grade": 4}),
    "GET /api/v1/projects/<int:project_id>/agreement": Call(managers(200)),
    # --- review queues: managers create, open / close and adjudicate; assignees (here annotator, manager and
    # admin) take the next item and let it go; the matrix queue's one item awaits adjudication ---
    "GET /api/v1/projects/<int:project_id>/review-queues/": Call(members(200)),
    "POST /api/v1/projects/<int:project_id>/review-queues/": Call(managers(201), body=lambda w: {
        "name": "matrix-new", "overlap": 1, "filter": {"status": "finished"}, "assignees": [w.users["annotator"].pk]}),
    "GET /api/v1/review-queues/<int:queue_id>/": Call(members(200)),
    "PATCH /api/v1/review-queues/<int:queue_id>/": Call(managers(200), body=lambda w: {"state": "closed"}),
    "POST /api/v1/review-queues/<int:queue_id>/next": Call(members(200)),
    "GET /api/v1/queue-items/<int:item_id>/": Call(managers(200)),
    "POST /api/v1/queue-items/<int:item_id>/release": Call(members(200), body=lambda w: {"skip": True}),
    "POST /api/v1/queue-items/<int:item_id>/adjudicate": Call(managers(200), body=lambda w: {"verdict": "accept"}),
    "GET /api/v1/projects/<int:project_id>/dashboard": Call(managers(200)),
    # --- redaction (issue 40): managers see and change the policy; switching it off needs an admin (its own test) ---
    "GET /api/v1/projects/<int:project_id>/redaction": Call(managers(200)),
    "PUT /api/v1/projects/<int:project_id>/redaction": Call(managers(200), body=lambda w: {"policy": {"words": ["Ann"]}}),
    "POST /api/v1/projects/<int:project_id>/redaction/marks": Call(
        managers(201), body=lambda w: {"kind": "name", "verdict": "missed", "text": "Ann Other"}),
}

HTTP_METHODS = ("get", "post", "put", "patch", "delete")


def rest_endpoints() -> dict[str, type]:
    """'METHOD route' -> view class, for every class-based view under /api/v1/, walked from the URL conf."""
    from django.urls import get_resolver
    from django.urls.resolvers import URLResolver

    found = {}

    def walk(patterns, prefix: str):
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
                continue
            view = getattr(pattern.callback, "view_class", None) or getattr(pattern.callback, "cls", None)
            if not route.startswith("api/v1/") or view is None:
                continue  # the admin has Django's own staff check; function views are the 404 catch-all and the SPA
            for method in HTTP_METHODS:
                if hasattr(view, method):
                    found[f"{method.upper()} /{route}"] = view

    walk(get_resolver().url_patterns, "")
    return found


def schema_operations() -> set[str]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {f"{method.upper()} {path}" for path, ops in schema["paths"].items() for method in ops}


def test_every_endpoint_has_a_row_and_every_row_an_endpoint():
    endpoints = set(rest_endpoints())
    missing = sorted(endpoints - set(TABLE))
    stale = sorted(set(TABLE) - endpoints)
    assert not missing, ("These endpoints have no row in tests/webapp/test_permission_matrix.py TABLE; add one with "
                         "the status each role gets:\n  " + "\n  ".join(missing))
    assert not stale, "These TABLE rows name endpoints that no longer exist:\n  " + "\n  ".join(stale)


def test_every_endpoint_is_in_the_openapi_schema():
    import re

    as_schema = {re.sub(r"<int:(\w+)>", r"{\1}", key) for key in rest_endpoints()} - {"GET /api/v1/openapi.json"}
    missing = sorted(as_schema - schema_operations())
    assert not missing, "Endpoints missing from /api/v1/openapi.json (so never fuzzed):\n  " + "\n  ".join(missing)


def _path(route: str, world: World, call: Call) -> str:
    import re

    def value(match):
        name = match.group(1)
        return str(getattr(world, call.ids.get(name, name)))

    return re.sub(r"<int:(\w+)>", value, route)


def _request(client: APIClient, method: str, path: str, body, raw):
    if raw is not None:
        data, content_type, headers = raw
        return client.generic(method, path, data, content_type=content_type, **headers)
    return getattr(client, method.lower())(path, body, format="json") if body is not None else \
        getattr(client, method.lower())(path)


class _Rollback(Exception):
    pass


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", sorted(TABLE))
def test_each_role_gets_the_status_the_table_gives(endpoint, checkpoint_dir, webm_chunk):
    if endpoint not in rest_endpoints():
        pytest.skip("not an endpoint any more (test_every_endpoint_has_a_row_and_every_row_an_endpoint says so)")
    call = TABLE[endpoint]
    method, route = endpoint.split(" ", 1)
    world = World(checkpoint_dir, webm_chunk)
    # the state the path and body need is built before any role's savepoint
    path = _path(route, world, call)
    body = call.body(world) if call.body else None
    raw = call.raw(world) if call.raw else None
    clients = {role: world.client(role) for role in ROLES}
    got, problems = {}, []
    for role in ROLES:
        try:
            with transaction.atomic():
                response = _request(clients[role], method, path, body, raw)
                content = b"".join(response.streaming_content) if response.streaming else response.content
                got[role] = response.status_code
                raise _Rollback
        except _Rollback:
            pass
        if response.status_code >= 400:
            try:
                detail = json.loads(content)["detail"]
                assert isinstance(detail, str) and detail
            except (ValueError, KeyError, TypeError, AssertionError):
                problems.append(f"{role}: the {response.status_code} is not JSON with a 'detail' message: {content[:200]!r}")
        if role in ("anonymous", "outsider") and MARKER.encode() in content:
            problems.append(f"{role} was sent data of a project they are not in: {content[:300]!r}")
    assert got == call.expected and not problems, (
        f"{method} {path}\n  expected {call.expected}\n  got      {got}\n  " + "\n  ".join(problems))


# --- the live-session socket ----------------------------------------------------------------------------
SOCKET_TABLE = {
    # what connecting gives: a hello with the role, or the close code
    "connect": _row(4401, 4403, "annotator", "manager", "admin"),
    # a claim of an episode another annotator controls: managers and admins may take it over
    "claim": _row(None, None, "error", "ack", "ack"),
}


@pytest.mark.django_db(transaction=True)
def test_each_role_gets_what_the_socket_table_gives(daphne_server, checkpoint_dir, webm_chunk):
    import websocket

    from annotation.services import command_submit
    from rollouts.models import Episode
    from webapp.auth import token_create

    world = World(checkpoint_dir, webm_chunk)
    live = Episode.objects.create(project=world.project, task=world.train_task, seed=11, mode="supervised",
                                  status="running")
    # "extra" (an annotator) controls the episode
    assert command_submit(episode_id=live.pk, user=world.users["extra"], frame={"type": "claim", "id": "c0"}).ok
    got = {"connect": {}, "claim": {}}
    url = daphne_server.replace("http", "ws") + f"/ws/episodes/{live.pk}/?after=0"
    for role in ROLES:
        header = [] if role == "anonymous" else [f"Authorization: Bearer {token_create(user=world.users[role])[1]}"]
        ws = websocket.create_connection(url, header=header, timeout=10, suppress_origin=True)
        try:
            opcode, data = ws.recv_data(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                got["connect"][role] = int.from_bytes(data[:2], "big")
                got["claim"][role] = None
                continue
            hello = json.loads(data)
            assert hello["type"] == "hello", hello
            got["connect"][role] = hello["data"]["role"]
            ws.send(json.dumps({"type": "claim", "id": f"claim-{role}"}))
            while True:
                message = json.loads(ws.recv())
                if message.get("id") == f"claim-{role}":
                    got["claim"][role] = message["type"]
                    break
            if message["type"] == "ack":  # hand it back so the next role finds it held by "extra" again
                assert command_submit(episode_id=live.pk, user=world.users[role],
                                      frame={"type": "release", "id": f"r-{role}"}).ok
                assert command_submit(episode_id=live.pk, user=world.users["extra"],
                                      frame={"type": "claim", "id": f"c-{role}"}).ok
        finally:
            ws.close()
    assert got == SOCKET_TABLE
