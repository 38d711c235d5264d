"""REST for authoring tasks beyond their CRUD (flywheel/api.py): the shipped tasks of each env kind, and importing
and exporting OSWorld / WebArena task files (flywheel/task_authoring.py). Managers only, but the catalogue, which
any signed-in person may read."""
from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import StrictSerializer, results_of
from core.errors import ApplicationError
from flywheel import selectors, task_authoring, task_files
from flywheel.api import TaskOutput
from flywheel.models import Role

MAX_FILE_BYTES = 2 * 1024 * 1024


class CatalogueKindOutput(serializers.Serializer):
    kind = serializers.CharField()
    format = serializers.ChoiceField(
        choices=sorted(task_authoring.FORMATS), allow_null=True,
        help_text="The JSON format its own tasks are written in; null: only shipped tasks.")
    tasks = inline_serializer("CatalogueTaskOutput", {
        "name": serializers.CharField(), "description": serializers.CharField(),
        "max_steps": serializers.IntegerField()}, many=True)
    error = serializers.CharField(help_text="Why its shipped tasks could not be listed; empty when they were.")


class TaskCatalogueApi(APIView):
    """Each env kind's shipped tasks (name, description, step limit) and the JSON format its own tasks are
    written in (null: only shipped tasks)."""

    @extend_schema(responses={200: inline_serializer("TaskCatalogue", {"kinds": CatalogueKindOutput(many=True)})})
    def get(self, request):
        return Response({"kinds": task_authoring.catalogue()})


class TaskImportInput(StrictSerializer):
    format = serializers.ChoiceField(choices=sorted(task_authoring.FORMATS))
    tasks = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=task_authoring.MAX_IMPORT)
    split = serializers.ChoiceField(choices=["train", "eval"], default="train")
    seed_start = serializers.IntegerField(min_value=0, default=0)
    seed_end = serializers.IntegerField(min_value=0, default=999)


class TaskImportApi(APIView):
    """Import tasks, all or none: a JSON body ``{format, tasks: [...]}``, or a multipart form with ``format`` and
    one or more ``files`` (each one task or a list). A refusal lists every problem in ``errors.tasks``."""

    parser_classes = [JSONParser, MultiPartParser]

    @extend_schema(request=TaskImportInput, responses={201: results_of(TaskOutput, "TasksImported")})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        if request.content_type.startswith("multipart/"):
            options, files = self._form(request)
        else:
            data = TaskImportInput(data=request.data)
            data.is_valid(raise_exception=True)
            options = dict(data.validated_data)
            files = [(f"tasks[{index}]", task) for index, task in enumerate(options.pop("tasks"))]
        created = task_authoring.task_import(project=project, actor=request.user, files=files, **options)
        return Response({"results": TaskOutput(created, many=True).data}, status=status.HTTP_201_CREATED)

    @staticmethod
    def _form(request) -> tuple[dict, list]:
        uploads = request.FILES.getlist("files")
        if not uploads:
            raise ApplicationError("Choose one or more task files to import.", errors={"files": ["No file given."]})
        too_big = [upload.name for upload in uploads if upload.size > MAX_FILE_BYTES]
        if too_big:
            raise ApplicationError(f"{too_big[0]} is larger than {MAX_FILE_BYTES // 1024 // 1024} MB; a task file "
                                   "is a few kilobytes.", errors={"files": ["Too large."]})
        options = {"format": request.data.get("format", ""), "split": request.data.get("split") or "train"}
        return options, [(upload.name, upload.read()) for upload in uploads]


class _FormatIsOurs(DefaultContentNegotiation):
    """JSON always: ``?format=`` names the task format here, not one of DRF's renderers."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class TaskExportApi(APIView):
    """The project's tasks of one format as a JSON file (a list): authored ones as written, shipped ones as
    shipped."""

    content_negotiation_class = _FormatIsOurs

    @extend_schema(parameters=[OpenApiParameter("format", str, enum=sorted(task_authoring.FORMATS), required=True)],
                   responses={200: {"type": "array", "items": {"type": "object", "additionalProperties": {}},
                                    "description": "The tasks, each as its format writes one."}})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        name = request.query_params.get("format", "")
        if not name:
            choices = " or ".join(f"?format={name}" for name in task_authoring.FORMATS)
            raise ApplicationError(f"Say which format to export: {choices}.", errors={"format": ["This field is required."]})
        tasks = task_authoring.task_export(project=project, format=name)
        response = HttpResponse(json.dumps(tasks, indent=2, ensure_ascii=False), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{project.slug}-{name}-tasks.json"'
        return response


# -- the file store of the files tasks download (flywheel/task_files.py) ---------------------------------------------
class StoredFileOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    path = serializers.CharField(allow_blank=True, help_text="The target path it is stored for; empty: any.")
    created_at = serializers.CharField(allow_null=True)


class NeededFileOutput(serializers.Serializer):
    url = serializers.CharField()
    path = serializers.CharField(help_text="Where the task puts it (a VM path), or a check's file name.")
    name = serializers.CharField()
    where = serializers.CharField(help_text="The step or check of the task that needs it.")
    stored = StoredFileOutput(allow_null=True, help_text="The stored file it will get; null: missing.")


class TaskFilesOutput(serializers.Serializer):
    task = serializers.IntegerField()
    task_name = serializers.CharField()
    split = serializers.CharField()
    files = NeededFileOutput(many=True)
    missing = serializers.IntegerField()


class TaskFilesApi(APIView):
    """The project's tasks that download files, each file with the stored one or none (missing; such a task is
    refused at start naming them). POST (multipart ``url``, ``path`` optional, ``file``) stores a file for a URL
    (and target path), replacing the one stored for them. Managers only."""

    parser_classes = [MultiPartParser]

    @extend_schema(responses={200: inline_serializer("TaskFiles", {"results": TaskFilesOutput(many=True)})})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response({"results": task_files.task_files_listing(project=project)})

    @extend_schema(request={"multipart/form-data": inline_serializer("TaskFileUpload", {
        "url": serializers.CharField(), "path": serializers.CharField(required=False),
        "file": serializers.FileField()})}, responses={201: StoredFileOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        entry = task_files.project_file_upload(project=project, actor=request.user, url=request.data.get("url", ""),
                                               path=request.data.get("path", ""), upload=request.FILES.get("file"))
        return Response(task_files._stored(entry), status=status.HTTP_201_CREATED)


class TaskFileApi(APIView):
    """Remove a stored file (tasks that need it are then refused at start again)."""

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, file_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        task_files.project_file_delete(project=project, actor=request.user, file_id=file_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
