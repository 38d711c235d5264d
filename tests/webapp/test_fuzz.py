"""A fuzz run of the REST API from its own OpenAPI schema (schemathesis), against a real daphne.

Every operation of /api/v1/openapi.json gets valid and invalid requests that schemathesis generates,
half of them aimed at real objects of a project the caller administers (so the views' inner code runs,
not only the 404), the rest at random ids. No answer may be a 5xx, and every error must be JSON with a
`detail` message. Derandomized with a fixed example count, so a run is repeatable and takes a bounded time.
"""
from __future__ import annotations

import json
import os
import re

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis.errors import Unsatisfiable

from tests.webapp.world import World, checkpoint_dir, webm_chunk  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

# per operation and mode (~40 operations); LOUPE_FUZZ_EXAMPLES=100 for a long hunt
_N = int(os.environ.get("LOUPE_FUZZ_EXAMPLES", "8"))
EXAMPLES = {"positive": _N, "negative": _N}
# Run last, and for the token on a throwaway one: they would otherwise take away what the rest needs.
DESTRUCTIVE_LAST = ("DELETE ",)
SLOW = {"GET /api/v1/health"}  # its Celery ping waits a second when no worker runs: one example is enough


def _problem(label: str, response) -> str | None:
    status = response.status_code
    if status >= 500 and not (label == "GET /api/v1/health" and status == 503):  # no worker runs here: degraded
        return f"{status}: {response.text[:300]!r}"
    if status == 400 and not response.content and "Content-Type" not in response.headers and \
            response.request.headers.get("Content-Type", "").startswith("multipart/form-data"):
        # Twisted, under daphne, refuses a POST whose multipart body does not parse before any of our code runs:
        # a bare 400 and a closed connection. Nothing of ours to fix; it is not a 5xx.
        return None
    if status >= 400:
        try:
            detail = json.loads(response.content)["detail"]
        except (ValueError, KeyError, TypeError):
            return f"{status} without a JSON 'detail': {response.headers.get('Content-Type')} {response.text[:200]!r}"
        if not isinstance(detail, str) or not detail:
            return f"{status} whose 'detail' is not a message: {detail!r}"
    return None


def test_no_generated_request_gets_a_5xx_or_a_non_json_error(daphne_server, checkpoint_dir, webm_chunk):
    import schemathesis
    from schemathesis import GenerationMode

    from webapp.auth import token_create

    schemathesis.serializer.alias("audio/webm", "application/octet-stream")  # audio chunks are raw bytes
    world = World(checkpoint_dir, webm_chunk)
    real_ids = {"project_id": world.project_id, "episode_id": world.episode_id, "member_id": world.member_id,
                "task_id": world.task_id, "clip_id": world.clip_id, "index": 0, "snapshot_id": world.snapshot_id,
                "cycle_id": world.cycle_id, "deployment_id": world.earlier_deployment_id}
    token = token_create(user=world.users["admin"])[1]
    throwaway = token_create(user=world.users["admin"])[1]
    schema = schemathesis.openapi.from_url(daphne_server + "/api/v1/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: (op.label.startswith(DESTRUCTIVE_LAST), op.label))
    assert len(operations) >= 30, [op.label for op in operations]
    session = requests.Session()
    failures: list[str] = []
    calls = 0
    succeeded: set[str] = set()  # operations that answered 2xx at least once: the requests reached real work

    for operation in operations:
        names = {p.name for p in operation.path_parameters}
        aimed = {name: real_ids[name] for name in names if name in real_ids}
        auth = throwaway if operation.label == "DELETE /api/v1/auth/token" else token
        for mode, count in EXAMPLES.items():
            generation = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
            strategies = [operation.as_strategy(generation_mode=generation)]
            if aimed:
                strategies.append(operation.as_strategy(generation_mode=generation, path_parameters=aimed))
            seen: set[str] = set()

            @settings(max_examples=1 if operation.label in SLOW else count, derandomize=True, database=None,
                      deadline=None, phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @given(case=st.one_of(strategies))
            def run(case):
                nonlocal calls
                calls += 1
                try:
                    response = case.call(base_url=daphne_server, session=session,
                                         headers={"Authorization": f"Bearer {auth}"}, timeout=30)
                except requests.RequestException as exc:
                    failures.append(f"{operation.label} ({mode}): no answer: {exc}\n    {case.as_curl_command()}")
                    return
                if response.status_code < 300:
                    succeeded.add(operation.label)
                problem = _problem(operation.label, response)
                if problem and re.sub(r"\d+", "N", problem) not in seen:
                    seen.add(re.sub(r"\d+", "N", problem))
                    failures.append(f"{operation.label} ({mode}): {problem}\n    {case.as_curl_command()}")

            try:
                run()
            except Unsatisfiable:  # nothing in this operation can be made invalid (no parameters, no body)
                assert mode == "negative", operation.label

    assert calls >= len(operations) * 3
    assert len(succeeded) >= len(operations) // 2, f"only these answered 2xx: {sorted(succeeded)}"
    assert not failures, f"{len(failures)} problems in {calls} requests:\n" + "\n".join(failures)
