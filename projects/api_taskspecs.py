"""REST for a project's tasks: their CRUD (members read, managers write), the shipped tasks of each env kind, and
importing and exporting OSWorld / WebArena task files (projects/taskspec_authoring.py) and the files they download.
Managers only, but the list and the catalogue, which members and any signed-in person may read."""
from __future__ import annotations

import json

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field, inline_serializer
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import LimitedCharField, StrictSerializer, keyset_page, results_of
from core.errors import ApplicationError
from projects import selectors, services, taskspec_authoring, taskspec_exchange, taskspec_files
from projects.api import paginate
from projects.models import Role, TaskSpec

MAX_FILE_BYTES = 2 * 1024 * 1024


# --- tasks -------------------------------------------------------------------------------------
class TaskOutput(serializers.ModelSerializer):
    source = serializers.SerializerMethodField()

    class Meta:
        model = TaskSpec
        fields = ["id", "env_kind", "task_name", "instruction_template", "seed_start", "seed_end", "split", "max_steps",
                  "definition", "source"]
        read_only_fields = fields  # an answer: every field is in it (the schema says so)

    @extend_schema_field(serializers.ChoiceField(choices=["shipped", "authored"]))
    def get_source(self, task) -> str:
        return "shipped" if task.definition is None else "authored"


DEFINITION_HELP = ("An authored task's JSON: an OSWorld task (desktop), a WebArena or any-URL task (webapp). Its id "
                   "names the task; the env's loader checks it.")


class TaskCreateInput(StrictSerializer):
    env_kind = serializers.CharField(max_length=32, default="miniwob")
    task_name = LimitedCharField("task_id", required=False, allow_blank=True, default="",
                                 help_text="A shipped task's name; with a definition, its id (or leave it out).")
    definition = serializers.JSONField(required=False, allow_null=True, default=None, help_text=DEFINITION_HELP)
    instruction_template = LimitedCharField("task_instruction", required=False, allow_blank=True, default="")
    seed_start = serializers.IntegerField(min_value=0, default=0)
    seed_end = serializers.IntegerField(min_value=0, default=999)
    split = serializers.ChoiceField(choices=["train", "eval"], default="train")
    max_steps = serializers.IntegerField(min_value=1, max_value=200, required=False, allow_null=True, default=None,
                                         help_text="Left out: the definition's own limit, else 10.")


class TaskUpdateInput(StrictSerializer):
    instruction_template = LimitedCharField("task_instruction", required=False, allow_blank=True)
    seed_start = serializers.IntegerField(min_value=0, required=False)
    seed_end = serializers.IntegerField(min_value=0, required=False)
    split = serializers.ChoiceField(choices=["train", "eval"], required=False)
    max_steps = serializers.IntegerField(min_value=1, max_value=200, required=False)
    definition = serializers.JSONField(required=False, help_text=DEFINITION_HELP)


class TaskListApi(APIView):
    @extend_schema(operation_id="projects_tasks_list", responses={200: keyset_page(TaskOutput, "TaskPage")})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id)
        return paginate(self, selectors.tasks_for_project(project=project), TaskOutput, ordering="id")

    @extend_schema(request=TaskCreateInput, responses={201: TaskOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = TaskCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        task = services.task_create(project=project, actor=request.user, **data.validated_data)
        return Response(TaskOutput(task).data, status=status.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    def _task(self, request, project_id: int, task_id: int) -> TaskSpec:
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        task = project.tasks.filter(pk=task_id).first()
        if task is None:
            raise ApplicationError("No such task in this project.", status=404)
        return task

    @extend_schema(request=TaskUpdateInput, responses={200: TaskOutput})
    def patch(self, request, project_id: int, task_id: int):
        task = self._task(request, project_id, task_id)
        data = TaskUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(TaskOutput(services.task_update(task=task, actor=request.user, **data.validated_data)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, task_id: int):
        services.task_delete(task=self._task(request, project_id, task_id), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CatalogueKindOutput(serializers.Serializer):
    kind = serializers.CharField()
    format = serializers.ChoiceField(
        choices=sorted(taskspec_authoring.FORMATS), allow_null=True,
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
        return Response({"kinds": taskspec_authoring.catalogue()})


class TaskImportInput(StrictSerializer):
    format = serializers.ChoiceField(choices=sorted(taskspec_authoring.FORMATS))
    tasks = serializers.ListField(child=serializers.JSONField(), min_length=1, max_length=taskspec_authoring.MAX_IMPORT)
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
        created = taskspec_exchange.task_import(project=project, actor=request.user, files=files, **options)
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

    @extend_schema(parameters=[OpenApiParameter("format", str, enum=sorted(taskspec_authoring.FORMATS), required=True)],
                   responses={200: {"type": "array", "items": {"type": "object", "additionalProperties": {}},
                                    "description": "The tasks, each as its format writes one."}})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        name = request.query_params.get("format", "")
        if not name:
            choices = " or ".join(f"?format={name}" for name in taskspec_authoring.FORMATS)
            raise ApplicationError(f"Say which format to export: {choices}.", errors={"format": ["This field is required."]})
        tasks = taskspec_exchange.task_export(project=project, format=name)
        response = HttpResponse(json.dumps(tasks, indent=2, ensure_ascii=False), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{project.slug}-{name}-tasks.json"'
        return response


# -- the file store of the files tasks download (projects/taskspec_files.py) ---------------------------------------------
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
        return Response({"results": taskspec_files.task_files_listing(project=project)})

    @extend_schema(request={"multipart/form-data": inline_serializer("TaskFileUpload", {
        "url": serializers.CharField(), "path": serializers.CharField(required=False),
        "file": serializers.FileField()})}, responses={201: StoredFileOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        entry = taskspec_files.project_file_upload(project=project, actor=request.user, url=request.data.get("url", ""),
                                               path=request.data.get("path", ""), upload=request.FILES.get("file"))
        return Response(taskspec_files._stored(entry), status=status.HTTP_201_CREATED)


class TaskFileApi(APIView):
    """Remove a stored file (tasks that need it are then refused at start again)."""

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, file_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        taskspec_files.project_file_delete(project=project, actor=request.user, file_id=file_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
