"""REST for checkpoints, deployments and training runs (managers register, deploy and train; members read)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.formats import FORMATS
from core.api import OpenRecord, StrictSerializer, keyset_page, results_of
from core.errors import ApplicationError
from projects import selectors
from projects.api import for_role, paginate
from projects.models import Role
from rollouts.api_episodes import CheckpointRef
from rollouts.models import Backend, Checkpoint
from training import deployments, runs
from training.models import RunStatus


# --- checkpoints, deployments, runs --------------------------------------------------------------
class CheckpointOutput(serializers.ModelSerializer):
    parent = serializers.SerializerMethodField()

    class Meta:
        model = Checkpoint
        fields = ["id", "name", "uri", "base_model", "parent", "produced_by", "action_format", "reads_images",
                  "metrics", "created_at"]
        read_only_fields = fields  # an answer: every field is in it (the schema says so)

    @extend_schema_field(CheckpointRef(allow_null=True))
    def get_parent(self, checkpoint) -> dict | None:
        return {"id": checkpoint.parent_id, "name": checkpoint.parent.name} if checkpoint.parent_id else None


class CheckpointRegisterInput(StrictSerializer):
    name = serializers.CharField(max_length=100)
    uri = serializers.CharField(max_length=500, help_text="The checkpoint directory (HF format) on the servers.")
    base_model = serializers.CharField(max_length=200, required=False, help_text="What it was trained from; "
                                                                                 "default: its directory.")
    parent = serializers.IntegerField(required=False, help_text="The checkpoint of this project it was trained from.")
    action_format = serializers.ChoiceField(
        choices=list(FORMATS), required=False,
        error_messages={"invalid_choice": f'Unknown action format "{{input}}"; use one of {", ".join(FORMATS)}.'},
        help_text="The format its answers are written in; default: the parent's, else its loupe.json's, else loupe.")
    reads_images = serializers.BooleanField(
        required=False, help_text="Its prompts carry the screenshots; default: the parent's, else its loupe.json's, "
                                  "else whether it is a vision-language model.")


class CheckpointListApi(APIView):
    """A project's checkpoints, newest first (members); register one from a directory (admins: it names a path on
    the servers), with the format it answers in and whether it reads screenshots."""

    @extend_schema(operation_id="projects_checkpoints_list",
                   responses={200: keyset_page(CheckpointOutput, "CheckpointPage")})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        response = paginate(self, project.checkpoints.select_related("parent"), CheckpointOutput)
        response.data["results"] = for_role(response.data["results"], role)
        return response

    @extend_schema(request=CheckpointRegisterInput, responses={201: CheckpointOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ADMIN)
        data = CheckpointRegisterInput(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        if not given["uri"].startswith("/"):
            raise ApplicationError("uri: give the checkpoint directory's absolute path on the servers.",
                                   errors={"uri": ["Use an absolute path."]})
        if project.checkpoints.filter(name=given["name"]).exists():
            raise ApplicationError(f"A checkpoint called '{given['name']}' already exists in this project.", status=409,
                                   errors={"name": ["Taken."]})
        parent = None
        if "parent" in given:
            parent = project.checkpoints.filter(pk=given["parent"]).first()
            if parent is None:
                raise ApplicationError("No such parent checkpoint in this project.", status=404,
                                       errors={"parent": ["Unknown."]})
        checkpoint = deployments.checkpoint_register(
            project=project, name=given["name"], uri=given["uri"], base_model=given.get("base_model") or given["uri"],
            parent=parent, action_format=given.get("action_format"), reads_images=given.get("reads_images"),
            actor=request.user)
        return Response(CheckpointOutput(checkpoint).data, status=status.HTTP_201_CREATED)


class DeploymentOutput(serializers.Serializer):
    """What DeploymentListApi answers of each deployment."""

    id = serializers.IntegerField()
    checkpoint = inline_serializer("DeployedCheckpointOutput", {
        "id": serializers.IntegerField(), "name": serializers.CharField(),
        "action_format": serializers.ChoiceField(choices=list(FORMATS), help_text="How it writes its answers."),
        "reads_images": serializers.BooleanField(help_text="It is sent the screenshots.")})
    backend = serializers.ChoiceField(choices=Backend.values)
    active = serializers.BooleanField()
    activated_at = serializers.DateTimeField(allow_null=True)
    deactivated_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()


class DeploymentListApi(APIView):
    @extend_schema(responses={200: results_of(DeploymentOutput, "DeploymentList", next_link=True)})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id)
        rows = project.deployments.select_related("checkpoint")[:100]
        return Response({"results": [
            {"id": d.pk, "checkpoint": {"id": d.checkpoint_id, "name": d.checkpoint.name,
                                        "action_format": d.checkpoint.action_format,
                                        "reads_images": d.checkpoint.reads_images}, "backend": d.backend,
             "active": d.active, "activated_at": d.activated_at, "deactivated_at": d.deactivated_at, "reason": d.reason}
            for d in rows], "next": None})


class RunCreateInput(StrictSerializer):
    snapshot = serializers.IntegerField()
    algorithm = serializers.ChoiceField(choices=["sft", "dpo", "rl"], required=False)
    init_checkpoint = serializers.IntegerField(required=False)
    max_steps = serializers.IntegerField(required=False, min_value=1, max_value=1_000_000)
    max_epochs = serializers.IntegerField(
        required=False, min_value=0, max_value=1000,
        help_text="Stop after this many passes over the rows (0: no cap); a few rows trained longer are memorised.")


RUN_METRIC_LINES = 200  # progress lines a run's answer carries at most


class RunMetricOutput(OpenRecord):
    """One progress line of the trainer: at ``step`` of ``total`` in a ``phase`` (demos, sft, dpo...), with what
    else it reported."""

    step = serializers.FloatField()
    total = serializers.FloatField(required=False)
    phase = serializers.CharField(required=False, help_text="Lines of runs before phases were named have none: sft.")
    loss = serializers.FloatField(required=False)
    line = serializers.IntegerField(required=False, help_text="Its number among the run's progress lines, from 0 "
                                    "(lines of runs before lines were numbered have none).")


class RunOutput(serializers.Serializer):
    """What run_output builds."""

    id = serializers.IntegerField()
    algorithm = serializers.CharField()
    status = serializers.ChoiceField(choices=RunStatus.values)
    progress = serializers.FloatField(help_text="0..1")
    config = serializers.DictField()
    snapshot = serializers.IntegerField(allow_null=True)
    metrics = RunMetricOutput(many=True, help_text="At most 200 of the progress lines, spread over the whole run "
                                                   "(metrics_every says how thinned), the last one kept.")
    warnings = serializers.ListField(child=serializers.CharField(), help_text="What a person should know about how "
                                     "training went (cut by its time budget, capped epochs), in plain words.")
    error = serializers.CharField()
    log_tail = serializers.CharField()
    checkpoint = CheckpointRef(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queued_seconds = serializers.FloatField(allow_null=True, help_text="Time in the queue before a training worker "
                                            "took it (so far, while it waits); null for a run started by hand.")
    training_seconds = serializers.FloatField(allow_null=True, help_text="Time training, from the worker taking it "
                                              "to its end (so far, while it runs); null before it starts.")
    metrics_lines = serializers.IntegerField(help_text="How many progress lines the trainer reported.")
    metrics_every = serializers.IntegerField(help_text="1: metrics holds every progress line; N: at most one line in "
                                             "N is kept (a long run's curve is thinned), so a chart says so.")


def _metrics_shown(metrics: list[dict]) -> tuple[list[dict], int, int]:
    """At most RUN_METRIC_LINES of a run's progress lines, spread over the whole run (its start included, its last
    line kept), with how many lines the trainer reported and the widest gap between kept ones (runs.py thins a
    long run's stored lines; each carries its ``line`` number, runs from before that do not)."""
    step = -(-len(metrics) // RUN_METRIC_LINES)
    shown = metrics[::step] if step > 1 else list(metrics)
    if shown and shown[-1] is not metrics[-1]:
        shown[-1] = metrics[-1]
    lines = [m["line"] for m in shown if isinstance(m.get("line"), int)]
    if len(lines) == len(shown) and lines:
        gaps = [b - a for a, b in zip(lines, lines[1:])]
        return shown, lines[-1] + 1, max([lines[0] + 1, *gaps])
    return shown, len(metrics), step


def run_output(r) -> dict:
    from django.utils import timezone

    now = timezone.now()
    queued = None if r.started_at is None and r.status != RunStatus.QUEUED else \
        max(0.0, ((r.started_at or now) - r.created_at).total_seconds())
    trained = None if r.started_at is None else max(0.0, ((r.finished_at or now) - r.started_at).total_seconds())
    metrics, lines, every = _metrics_shown(r.metrics)
    return {"id": r.pk, "algorithm": r.algorithm, "status": r.status, "progress": r.progress, "config": r.config,
            "snapshot": r.snapshot_id, "metrics": metrics, "warnings": r.warnings, "error": r.error,
            "log_tail": r.log[-4000:],
            "checkpoint": {"id": r.checkpoint_id, "name": r.checkpoint.name} if r.checkpoint_id else None,
            "created_at": r.created_at, "started_at": r.started_at, "finished_at": r.finished_at,
            "queued_seconds": None if queued is None else round(queued, 1),
            "training_seconds": None if trained is None else round(trained, 1),
            "metrics_lines": lines, "metrics_every": every}


class RunListApi(APIView):
    @extend_schema(responses={200: results_of(RunOutput, "RunList", next_link=True)})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        return Response({"results": for_role([run_output(r) for r in project.runs.select_related("checkpoint")[:50]],
                                             role), "next": None})

    @extend_schema(request=RunCreateInput, responses={202: RunOutput})
    def post(self, request, project_id: int):
        """Train on a ready snapshot (managers)."""
        project, role = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = RunCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        snapshot = project.snapshots.filter(pk=data.validated_data["snapshot"]).first()
        if snapshot is None:
            raise ApplicationError("No such snapshot in this project.", status=404, errors={"snapshot": ["Unknown."]})
        init = None
        if "init_checkpoint" in data.validated_data:
            init = project.checkpoints.filter(pk=data.validated_data["init_checkpoint"]).first()
            if init is None:
                raise ApplicationError("No such checkpoint in this project.", status=404,
                                       errors={"init_checkpoint": ["Unknown."]})
        run = runs.run_create(project=project, snapshot=snapshot, algorithm=data.validated_data.get("algorithm"),
                                  init_checkpoint=init, max_steps=data.validated_data.get("max_steps"),
                                  max_epochs=data.validated_data.get("max_epochs", runs.DEFAULT_MAX_EPOCHS),
                                  actor=request.user)
        return Response(for_role(run_output(run), role), status=status.HTTP_202_ACCEPTED)
