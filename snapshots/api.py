"""REST for a project's routing and buckets, and its dataset snapshots: freeze, read, rows, export (managers; the
export with what redaction hid: admins, with a reason, audited)."""
from __future__ import annotations

import itertools

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import LimitedCharField, OpenRecord, StrictSerializer, UserRef, results_of
from core.audit import audit_record
from core.errors import ApplicationError
from projects import selectors
from projects.api_settings import SettingsSectionApi
from projects.models import Role, Split
from rollouts.models import Mode
from rollouts.routing import ROUTING_SETTINGS, RULES, routing_of
from snapshots import buckets as datasets
from snapshots import build, export
from snapshots.models import DatasetSnapshot, SnapshotKind, SnapshotStatus


# --- routing and snapshots (managers) --------------------------------------------------------------
class RoutingInput(StrictSerializer):
    rule = serializers.ChoiceField(choices=list(RULES), required=False)
    reward_threshold = serializers.FloatField(required=False, min_value=0, max_value=1,
                                              help_text="share of the full reward an episode needs to count as a success")


class BucketOutput(serializers.Serializer):
    rows = serializers.IntegerField()
    episodes = serializers.IntegerField()
    new_rows = serializers.IntegerField(help_text="Rows of episodes that no ready snapshot of this kind holds yet.")


class RoutingOutput(serializers.Serializer):
    rule = serializers.ChoiceField(choices=list(RULES))
    reward_threshold = serializers.FloatField()
    buckets = inline_serializer("RoutingBuckets", {
        **{kind: BucketOutput() for kind in SnapshotKind.values},
        "rft": BucketOutput(help_text="The part of sft that autonomous successes make (rejection-sampled rows).")})


@extend_schema_view(get=extend_schema(responses={200: RoutingOutput}),
                    patch=extend_schema(request=RoutingInput, responses={200: RoutingOutput}))
class RoutingApi(SettingsSectionApi):
    """The project's validator V and how many rows each bucket holds now."""
    section, input_serializer = ROUTING_SETTINGS, RoutingInput

    def output(self, project):
        return {**routing_of(project), "buckets": datasets.buckets(project)}


class SnapshotFilterOutput(serializers.Serializer):
    """A snapshot's filter as datasets.filter_clean kept it: only the keys it was given."""

    tasks = serializers.ListField(child=serializers.IntegerField(), required=False)
    split = serializers.ChoiceField(choices=Split.choices, required=False)
    checkpoint = serializers.IntegerField(required=False)
    mode = serializers.ChoiceField(choices=Mode.values, required=False)
    created_after = serializers.CharField(required=False)
    created_before = serializers.CharField(required=False)
    only_new = serializers.BooleanField(required=False)


class SnapshotLineageOutput(OpenRecord):
    tasks = serializers.DictField(child=serializers.IntegerField(), required=False, help_text="Rows by task.")
    checkpoints = serializers.DictField(child=serializers.IntegerField(), required=False,
                                       help_text="Rows by checkpoint.")


class SnapshotOutput(serializers.Serializer):
    """What snapshot_output builds."""

    id = serializers.IntegerField()
    project = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=SnapshotKind.choices)
    name = serializers.CharField()
    filter = SnapshotFilterOutput()
    routing = inline_serializer("SnapshotRoutingOutput", {
        "rule": serializers.ChoiceField(choices=list(RULES), required=False),
        "reward_threshold": serializers.FloatField(required=False)})
    status = serializers.ChoiceField(choices=SnapshotStatus.values)
    progress = serializers.FloatField(help_text="0..1")
    error = serializers.CharField()
    rows = serializers.IntegerField()
    episodes = serializers.IntegerField()
    sha256 = serializers.CharField()
    size_bytes = serializers.IntegerField()
    lineage = SnapshotLineageOutput()
    created_by = UserRef(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True, help_text="When a worker began writing it.")
    finished_at = serializers.DateTimeField(allow_null=True)
    export_url = serializers.CharField()
    duplicate = serializers.BooleanField(help_text="In a freeze's answer: the same data is already frozen (or being "
                                                   "frozen) as this snapshot.")


def snapshot_output(snapshot: DatasetSnapshot) -> dict:
    return {
        "id": snapshot.pk, "project": snapshot.project_id, "kind": snapshot.kind, "name": snapshot.name,
        "filter": snapshot.filter, "routing": snapshot.routing, "status": snapshot.status,
        "progress": snapshot.progress, "error": snapshot.error, "rows": snapshot.rows, "episodes": snapshot.episodes,
        "sha256": snapshot.sha256, "size_bytes": snapshot.size_bytes, "lineage": snapshot.lineage,
        "created_by": {"id": snapshot.created_by_id, "username": snapshot.created_by.username}
        if snapshot.created_by_id else None,
        "created_at": snapshot.created_at, "started_at": snapshot.started_at, "finished_at": snapshot.finished_at,
        "export_url": f"/api/v1/snapshots/{snapshot.pk}/export",
        "duplicate": getattr(snapshot, "duplicate", False),
    }


class SnapshotCreateInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=SnapshotKind.choices)
    name = LimitedCharField("snapshot_name", required=False, allow_blank=True, default="")
    filter = serializers.DictField(required=False, default=dict)


class SnapshotListApi(APIView):
    @extend_schema(responses={200: results_of(SnapshotOutput, "SnapshotList", next_link=True)})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        rows = project.snapshots.select_related("created_by")[:200]
        return Response({"results": [snapshot_output(s) for s in rows], "next": None})

    @extend_schema(request=SnapshotCreateInput, responses={202: SnapshotOutput, 200: SnapshotOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = SnapshotCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        snapshot = build.snapshot_create(project=project, actor=request.user, **data.validated_data)
        # the same data frozen again (a double click): the snapshot that holds it, not a copy
        return Response(snapshot_output(snapshot),
                        status=status.HTTP_200_OK if snapshot.duplicate else status.HTTP_202_ACCEPTED)


def _snapshot_for(request, snapshot_id: int) -> DatasetSnapshot:
    snapshot = DatasetSnapshot.objects.select_related("created_by", "project").filter(pk=snapshot_id).first()
    if snapshot is None or selectors.project_role(user=request.user, project=snapshot.project_id) is None:
        raise ApplicationError("No such snapshot, or you are not a member of its project.", status=404)
    selectors.project_for_user(user=request.user, project_id=snapshot.project_id, minimum=Role.MANAGER)
    return snapshot


class SnapshotDetailApi(APIView):
    @extend_schema(responses={200: SnapshotOutput})
    def get(self, request, snapshot_id: int):
        return Response(snapshot_output(_snapshot_for(request, snapshot_id)))


class SnapshotRowsApi(APIView):
    @extend_schema(parameters=[OpenApiParameter("limit", int)], responses={200: inline_serializer("SnapshotRows", {
        "rows": serializers.ListField(child=serializers.DictField(), help_text="The first rows, as exported.")})})
    def get(self, request, snapshot_id: int):
        snapshot = _snapshot_for(request, snapshot_id)
        try:
            limit = max(1, min(int(request.query_params.get("limit", 20)), 200))
        except ValueError:
            raise ApplicationError("'limit' must be a number.", errors={"limit": ["Not a number."]})
        return Response({"rows": export.snapshot_preview(snapshot, limit)})


class SnapshotExportApi(APIView):
    """The export bundle, streamed as it is zipped: constant memory and no request timeout, whatever the size."""

    @extend_schema(responses={(200, "application/zip"): bytes})
    def get(self, request, snapshot_id: int):
        snapshot = _snapshot_for(request, snapshot_id)
        stream = export.export_stream(snapshot)
        first = next(stream)  # raises the "not ready" error before any byte is sent
        response = StreamingHttpResponse(itertools.chain([first], stream), content_type="application/zip")
        slug = f"{snapshot.project.slug}-{snapshot.kind}-{snapshot.pk}"
        response["Content-Disposition"] = f'attachment; filename="{slug}.zip"'
        response["X-Snapshot-Sha256"] = snapshot.sha256
        return response


class SnapshotExportUnredactedInput(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why the data leaves without redaction (audited).")


class SnapshotExportUnredactedApi(APIView):
    """The export bundle with what the project kept of its steps before redaction (originals/): a project admin
    only, with a reason, audited. A manager is refused saying so; an export without originals is the plain one."""

    @extend_schema(request=SnapshotExportUnredactedInput, responses={(200, "application/zip"): bytes})
    def post(self, request, snapshot_id: int):
        snapshot = _snapshot_for(request, snapshot_id)
        if selectors.project_role(user=request.user, project=snapshot.project_id) != Role.ADMIN:
            raise ApplicationError("Only an admin of this project can export it without redaction: the data would "
                                   "leave with the personal data it hides. Export it redacted, or ask an admin.",
                                   status=403)
        data = SnapshotExportUnredactedInput(data=request.data)
        data.is_valid(raise_exception=True)
        stream = export.export_stream(snapshot, originals=True)
        first = next(stream)  # raises the "not ready" error before any byte is sent (and before the audit)
        audit_record(actor=request.user, action="snapshot.export_unredacted", target=snapshot,
                     data={"reason": data.validated_data["reason"].strip()})
        response = StreamingHttpResponse(itertools.chain([first], stream), content_type="application/zip")
        slug = f"{snapshot.project.slug}-{snapshot.kind}-{snapshot.pk}-unredacted"
        response["Content-Disposition"] = f'attachment; filename="{slug}.zip"'
        response["X-Snapshot-Sha256"] = snapshot.sha256
        return response
