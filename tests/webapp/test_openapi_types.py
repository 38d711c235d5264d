"""The frontend's wire types are the API's: frontend/src/api/schema.d.ts is what openapi-typescript makes of the live
OpenAPI schema, and the schema says what the views really answer (each real answer below is checked against it, with
no property the schema does not declare)."""
from __future__ import annotations

import copy
import datetime as dt
import re

import pytest
from django.core.management import CommandError, call_command
from openapi_schema_validator import OAS30Validator
from rest_framework.test import APIClient

from tests.factories import make_finished_episode, make_member, make_user
from tests.webapp.world import World, checkpoint_dir, webm_chunk  # noqa: F401 (fixtures)


def test_the_checked_in_wire_types_are_what_the_schema_gives(tmp_path, monkeypatch):
    from webapp.management.commands import api_types

    call_command("api_types", "--check")  # the checked-in file is current

    stale = tmp_path / "schema.d.ts"
    stale.write_text(api_types.TYPES.read_text().replace("n_steps: number;", "n_steps: string;", 1))
    monkeypatch.setattr(api_types, "TYPES", stale)
    with pytest.raises(CommandError, match="is not what the API's schema gives"):
        call_command("api_types", "--check")


# --- real answers against the schema ---------------------------------------------------------------------------------
def _closed(node, components: dict):
    """``node`` with every $ref inlined and every object that declares its properties closed to others (an
    OpenRecord says additionalProperties itself), so an undeclared key in an answer fails."""
    if isinstance(node, list):
        return [_closed(item, components) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _closed(components[node["$ref"].rsplit("/", 1)[1]], components)
    out = {key: _closed(value, components) for key, value in node.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    if out.get("nullable") and "type" not in out:  # {"allOf": [ref], "nullable": true}: the ref, or null
        return {"anyOf": [{k: v for k, v in out.items() if k != "nullable"}, {"enum": [None]}]}
    return out


class Answers:
    """The schema's answer for each (method, path, status), and a check of real answers against it."""

    def __init__(self):
        from drf_spectacular.generators import SchemaGenerator

        self.schema = SchemaGenerator().get_schema(request=None, public=True)
        self.components = self.schema["components"]["schemas"]
        self.checked: set[str] = set()

    def check(self, client, method: str, url: str, body=None, status: int = 200):
        response = getattr(client, method)(url, body, format="json") if body is not None else getattr(client, method)(url)
        assert response.status_code == status, (method, url, response.status_code, response.content[:500])
        path = url.split("?")[0]
        template = next(t for t in self.schema["paths"]
                        if re.fullmatch(re.sub(r"\{\w+\}", r"[^/]+", t), path))
        declared = self.schema["paths"][template][method]["responses"][str(status)]
        schema = _closed(declared["content"]["application/json"]["schema"], self.components)
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in OAS30Validator(schema).iter_errors(response.json())]
        assert not errors, f"{method.upper()} {template} {status}:\n  " + "\n  ".join(errors[:20])
        self.checked.add(f"{method.upper()} {template}")
        return response.json()


def _a_trained_cycle(world: World) -> int:
    """A cycle as the cycle's own code records one: gate, timings, a run, both evaluations and the decision."""
    from cycles import cycle_settings
    from cycles import decide
    from cycles import stages
    from training import deployments
    from cycles.models import Cycle, CycleState, Evaluation
    from training.models import TrainingRun

    project = world.project
    config = cycle_settings.settings_clean(project, {"min_new_rows": 1})
    rows = stages.bucket_rows(project, config)
    candidate = deployments.checkpoint_register(project=project, name="trained", uri=str(world.checkpoint_dir))
    run = TrainingRun.objects.create(
        project=project, algorithm="sft", status="succeeded", progress=1.0, checkpoint=candidate, log="trained",
        metrics=[{"step": step, "total": 4, "loss": 2.0 - step / 4, "phase": "sft"} for step in range(1, 5)],
        started_at=dt.datetime.now(dt.UTC), finished_at=dt.datetime.now(dt.UTC))
    started = dt.datetime.now(dt.UTC).isoformat()
    cycle = Cycle.objects.create(
        project=project, iteration=7, state=CycleState.DECIDE, candidate=candidate, baseline=world.checkpoint,
        config=config, run=run, progress={"done": 1, "total": 2, "label": "evaluate candidate"},
        decision_data={"gate": {"buckets": rows, "new_rows": 1, "min_new_rows": 1}},
        timings={"gate": {"started": started, "finished": started, "seconds": 0.5}, "decide": {"started": started}})
    for checkpoint, role, rate in ((candidate, "candidate", 0.6), (world.checkpoint, "deployed", 0.4)):
        Evaluation.objects.create(
            checkpoint=checkpoint, cycle=cycle, role=role, split="eval", episodes=10, success_rate=rate,
            mean_reward=rate, seeds={"click-link": "100000-100009"},
            details={"per_task": {"click-link": {"episodes": 10, "success_rate": rate, "mean_reward": rate,
                                                 "mean_steps": 3.0, "void_rate": 0.0}}, "eval_seconds": 12.5})
    cycle.decision_data = {**cycle.decision_data, "decision": decide.decision_of(cycle), "awaiting_approval": True}
    cycle.save(update_fields=["decision_data"])
    return cycle.pk


@pytest.mark.django_db(transaction=True)
def test_every_typed_answer_is_what_its_schema_says(checkpoint_dir, webm_chunk):
    from rollouts.models import Episode

    world = World(checkpoint_dir, webm_chunk)
    answers = Answers()
    admin, manager, annotator = (world.client(role) for role in ("admin", "manager", "annotator"))
    p, e = world.project_id, world.episode_id
    queue, item = world.queue_id, world.item_id  # first: the queue takes every finished episode there is
    proposal = {"thought": "click cancel", "action": {"name": "click", "args": {"x": 2, "y": 2}},
                "action_text": "click(x=2, y=2)", "raw": "Thought: click cancel\nAction: click(x=2, y=2)",
                "void_reason": None}
    rejected = {"action": {"name": "click", "args": {"x": 1, "y": 1}}, "thought": "no", "reason": "wrong button"}
    corrected = make_finished_episode(world.project, world.train_task, mode="supervised",
                                      created_by=world.users["annotator"],
                                      steps=[{"actor": "edited", "proposal": proposal, "rejections": [rejected]}])
    watcher = make_user()
    make_member(world.project, watcher, "annotator")
    queued = Episode.objects.create(project=world.project, task=world.train_task, seed=3, mode="supervised",
                                    status="queued", created_by=watcher, controller=watcher)
    cycle = _a_trained_cycle(world)

    # projects, members, tasks, checkpoints, deployments, runs
    answers.check(annotator, "get", "/api/v1/projects/")
    answers.check(admin, "get", f"/api/v1/projects/{p}/")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/", {"description": "typed"})
    answers.check(admin, "get", f"/api/v1/projects/{p}/members/")
    answers.check(admin, "get", f"/api/v1/projects/{p}/tasks/")
    answers.check(annotator, "get", "/api/v1/tasks/catalogue")
    answers.check(admin, "get", f"/api/v1/projects/{p}/checkpoints/")
    answers.check(admin, "get", f"/api/v1/projects/{p}/deployments/")
    answers.check(admin, "get", f"/api/v1/projects/{p}/runs/")
    # episodes
    page = answers.check(manager, "get", f"/api/v1/episodes/?project={p}&page_size=2")
    assert page["next"] and any(item["queue"] for item in answers.check(
        manager, "get", f"/api/v1/episodes/?project={p}&status=queued")["results"])
    answers.check(annotator, "get", f"/api/v1/episodes/{queued.pk}/")
    detail = answers.check(admin, "get", f"/api/v1/episodes/{corrected.pk}/")
    assert detail["steps"][0]["proposal"] and detail["steps"][0]["rejections"]
    answers.check(admin, "get", f"/api/v1/episodes/{e}/neighbours?project={p}")
    answers.check(admin, "get", f"/api/v1/episodes/{e}/branch")
    compare = answers.check(admin, "get", f"/api/v1/episodes/{world.branch_episode_id}/compare")
    assert compare["parent"] and compare["screens"]
    # think-aloud, polish, reviews, judge
    answers.check(annotator, "get", f"/api/v1/episodes/{e}/transcript")
    answers.check(annotator, "get", f"/api/v1/audio/{world.clip_id}/")
    answers.check(annotator, "get", f"/api/v1/episodes/{e}/polish")
    answers.check(manager, "patch", f"/api/v1/episodes/{e}/steps/0/polish", {"polished_thought": "I click the first one."})
    answers.check(manager, "get", f"/api/v1/projects/{p}/polish")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/polish", {"enabled": True})
    answers.check(manager, "put", f"/api/v1/episodes/{corrected.pk}/review",
                  {"verdict": "accept", "grade": 4, "step_labels": {"0": "good"}, "comment": "fine"})
    answers.check(manager, "get", f"/api/v1/episodes/{corrected.pk}/reviews/")
    answers.check(manager, "get", f"/api/v1/episodes/{e}/judgements/")
    answers.check(manager, "get", f"/api/v1/projects/{p}/judge")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/judge", {"samples": 3})
    answers.check(manager, "get", f"/api/v1/projects/{p}/judge/calibration")
    # asking a person when the policy is unsure
    answers.check(annotator, "get", f"/api/v1/projects/{p}/asking")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/asking", {"ask_below": 0.5})
    answers.check(manager, "get", f"/api/v1/projects/{p}/asking/calibration")
    answers.check(annotator, "get", f"/api/v1/projects/{p}/asks")
    # review queues
    answers.check(annotator, "get", f"/api/v1/projects/{p}/review-queues/")
    answers.check(manager, "get", f"/api/v1/review-queues/{queue}/")
    answers.check(annotator, "get", f"/api/v1/review-queues/{queue}/")
    answers.check(manager, "get", f"/api/v1/queue-items/{item}/")
    answers.check(manager, "post", f"/api/v1/queue-items/{item}/adjudicate", {"verdict": "accept"})
    answers.check(annotator, "post", f"/api/v1/review-queues/{queue}/next", {})
    # datasets, dashboard
    answers.check(manager, "get", f"/api/v1/projects/{p}/tasks/files")
    answers.check(manager, "get", f"/api/v1/projects/{p}/routing")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/routing", {"reward_threshold": 0.6})
    snapshot = world.snapshot_id
    answers.check(manager, "get", f"/api/v1/projects/{p}/snapshots/")
    assert answers.check(manager, "get", f"/api/v1/snapshots/{snapshot}/")["lineage"]
    answers.check(manager, "get", f"/api/v1/snapshots/{snapshot}/rows?limit=2")
    answers.check(manager, "get", f"/api/v1/projects/{p}/dashboard")
    answers.check(manager, "get", f"/api/v1/projects/{p}/agreement")
    # cycles and deployments
    answers.check(annotator, "get", f"/api/v1/projects/{p}/cycles/")
    answers.check(admin, "get", f"/api/v1/cycles/{cycle}/")
    answers.check(annotator, "get", f"/api/v1/projects/{p}/cycle-settings")
    answers.check(manager, "patch", f"/api/v1/projects/{p}/cycle-settings", {"eval_seeds": 5})
    answers.check(manager, "post", f"/api/v1/cycles/{cycle}/reject", {"reason": "not now"})
    answers.check(manager, "post", f"/api/v1/projects/{p}/deployments/{world.earlier_deployment_id}/rollback")
    # the account and the server
    answers.check(annotator, "get", "/api/v1/auth/session")
    answers.check(annotator, "get", "/api/v1/auth/me")
    staff = APIClient()  # the environment service's hosts are for the site's admins (is_staff)
    staff.force_authenticate(make_user(staff=True))
    answers.check(staff, "get", "/api/v1/envservice/hosts")
    health = answers.check(admin, "get", "/api/v1/health", status=503)  # no Celery worker answers here
    assert health["detail"] and "error" in health["checks"]["celery"]

    # last: a policy change makes the snapshots frozen before it fail to build (core/redaction.rows_redact)
    answers.check(manager, "get", f"/api/v1/projects/{p}/redaction")
    answers.check(manager, "put", f"/api/v1/projects/{p}/redaction", {"policy": {"words": ["Ann"]}})

    # every GET that answers JSON was checked (the rest answer files)
    json_gets = {f"GET {path}" for path, ops in answers.schema["paths"].items() for method, op in ops.items()
                 if method == "get" and "application/json" in op["responses"].get("200", {}).get("content", {})}
    assert json_gets - answers.checked - {"GET /api/v1/projects/{project_id}/tasks/export"} == set()


def test_an_undeclared_key_fails_the_check():
    """The check bites: an answer with a key its schema does not declare, or a key of the wrong type, is refused."""
    components = {"Thing": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}
    schema = _closed({"$ref": "#/components/schemas/Thing"}, copy.deepcopy(components))
    assert OAS30Validator(schema).is_valid({"id": 1})
    assert not OAS30Validator(schema).is_valid({"id": 1, "extra": True})
    assert not OAS30Validator(schema).is_valid({"id": "1"})
