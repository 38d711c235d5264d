"""REST for projects, members, tasks, episodes, checkpoints, snapshots and runs. Views are thin: selectors read,
the topic modules (projects, episodes, deployments, snapshots, training) write. Longer than 400 lines: one short
class per endpoint with its serializers beside it reads better than the same classes spread over files."""
from __future__ import annotations

import itertools

from django.core.files.storage import default_storage
from django.http import FileResponse, StreamingHttpResponse
from drf_spectacular.utils import (OpenApiParameter, extend_schema, extend_schema_field, extend_schema_view,
                                   inline_serializer)
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.formats import FORMATS
from flywheel import datasets, deployments, episodes, judge, projects, selectors, snapshots, training
from flywheel.models import (Actor, Backend, Checkpoint, Correction, DatasetSnapshot, Episode, EpisodeStatus, Event,
                             JudgeVerdict, Membership, Mode, Outcome, PolishState, ReviewStatus, Role, RunStatus,
                             SnapshotKind, SnapshotStatus, Split, Step, TaskSpec)
from flywheel.api_settings import SettingsSectionApi
from flywheel.routing import ROUTING_SETTINGS, RULES, routing_of
from core.api import LimitedCharField, OpenRecord, StrictSerializer, UserRef, keyset_page, results_of
from core.errors import ApplicationError
from core.paths import paths_hidden


class Page(CursorPagination):
    """Keyset pagination: stable and fast however deep the list."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = "-id"


def for_role(data, role: str | None):
    """What a member of ``role`` reads of checkpoints, runs and cycles: server paths are for admins only."""
    return data if role == Role.ADMIN else paths_hidden(data)


def paginate(view: APIView, queryset, serializer_class, ordering: str = "-id", **context):
    page = Page()
    page.ordering = ordering if ordering.lstrip("-") == "id" else (ordering, "-id")
    items = page.paginate_queryset(queryset, view.request, view=view)
    data = serializer_class(items, many=True, context=context).data
    return Response({"results": data, "next": page.get_next_link(), "previous": page.get_previous_link()})


# --- projects ----------------------------------------------------------------------------------
class ProjectOutput(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()
    role = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ChoiceField(choices=Role.choices, allow_null=True))
    def get_role(self, project) -> str | None:
        user = self.context["user"]
        if user.is_staff:
            return Role.ADMIN
        return self.context.get("roles", {}).get(project.pk) or selectors.project_role(user=user, project=project)


class ProjectUpdateInput(StrictSerializer):
    name = LimitedCharField("project_name", required=False)
    description = serializers.CharField(required=False, allow_blank=True)


class ProjectListApi(APIView):
    @extend_schema(operation_id="projects_list", responses={200: keyset_page(ProjectOutput, "ProjectPage")})
    def get(self, request):
        projects = selectors.projects_for_user(user=request.user)
        roles = dict(Membership.objects.filter(user=request.user).values_list("project_id", "role"))
        return paginate(self, projects, ProjectOutput, ordering="id", user=request.user, roles=roles)


class ProjectDetailApi(APIView):
    @extend_schema(responses={200: ProjectOutput})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        return Response(ProjectOutput(project, context={"user": request.user, "roles": {project.pk: role}}).data)

    @extend_schema(request=ProjectUpdateInput, responses={200: ProjectOutput})
    def patch(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = ProjectUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        project = projects.project_update(project=project, actor=request.user, **data.validated_data)
        return Response(ProjectOutput(project, context={"user": request.user, "roles": {project.pk: role}}).data)


# --- members -----------------------------------------------------------------------------------
class MemberOutput(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.SerializerMethodField()
    role = serializers.ChoiceField(choices=Role.choices)

    @extend_schema_field(UserRef)
    def get_user(self, membership) -> dict:
        return {"id": membership.user_id, "username": membership.user.username}


class MemberCreateInput(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


class MemberUpdateInput(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class MemberListApi(APIView):
    @extend_schema(operation_id="projects_members_list", responses={200: keyset_page(MemberOutput, "MemberPage")})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id)
        return paginate(self, selectors.members_for_project(project=project), MemberOutput, ordering="id")

    @extend_schema(request=MemberCreateInput, responses={201: MemberOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ADMIN)
        data = MemberCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = projects.membership_set(project=project, actor=request.user, **data.validated_data)
        return Response(MemberOutput(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(APIView):
    def _membership(self, request, project_id: int, member_id: int) -> Membership:
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ADMIN)
        membership = project.memberships.select_related("user").filter(pk=member_id).first()
        if membership is None:
            raise ApplicationError("No such member in this project.", status=404)
        return membership

    @extend_schema(request=MemberUpdateInput, responses={200: MemberOutput})
    def patch(self, request, project_id: int, member_id: int):
        membership = self._membership(request, project_id, member_id)
        data = MemberUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = projects.membership_set(project=membership.project, actor=request.user,
                                             username=membership.user.username, role=data.validated_data["role"])
        return Response(MemberOutput(membership).data)

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, member_id: int):
        projects.membership_remove(membership=self._membership(request, project_id, member_id), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


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
        task = projects.task_create(project=project, actor=request.user, **data.validated_data)
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
        return Response(TaskOutput(projects.task_update(task=task, actor=request.user, **data.validated_data)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, task_id: int):
        projects.task_delete(task=self._task(request, project_id, task_id), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- episodes ------------------------------------------------------------------------------------
# The fields below declare what episodes.episode_payload / step_payload build (the schema's types); the output is
# theirs, unchanged (to_representation).
class CheckpointRef(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class EpisodeTaskOutput(serializers.Serializer):
    id = serializers.IntegerField()
    task_name = serializers.CharField()
    env_kind = serializers.CharField()
    split = serializers.ChoiceField(choices=Split.choices)


class StepLabelsOutput(serializers.Serializer):
    reviewer = serializers.CharField(help_text="The reviewer's username.")
    verdict = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField(), help_text="Label by step index.")


class ReviewSummaryOutput(serializers.Serializer):
    """Empty until the episode is reviewed."""

    reviews = serializers.IntegerField(required=False)
    accepts = serializers.IntegerField(required=False)
    rejects = serializers.IntegerField(required=False)
    grade_mean = serializers.FloatField(required=False, allow_null=True)
    final_verdict = serializers.CharField(required=False, help_text="A manager's adjudicated verdict, when recorded.")
    step_labels = StepLabelsOutput(many=True, required=False)


class EpisodeQueueOutput(serializers.Serializer):
    """A queued episode's place in its lane: supervised episodes wait in the people's lane, autonomous ones in the
    machines'."""

    lane = serializers.ChoiceField(choices=["people", "machines"])
    ahead = serializers.IntegerField(help_text="Queued episodes of the same lane queued before this one.")
    running = serializers.IntegerField(help_text="Episodes of the same lane running now.")


class EpisodeOutput(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.IntegerField()
    task = EpisodeTaskOutput()
    seed = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=Mode.values)
    status = serializers.ChoiceField(choices=EpisodeStatus.values)
    outcome = serializers.ChoiceField(choices=Outcome.values)
    end_reason = serializers.CharField()
    reward = serializers.FloatField(allow_null=True, help_text="The environment's reward; null until it scores.")
    n_steps = serializers.IntegerField()
    created_by = UserRef(allow_null=True)
    checkpoint = CheckpointRef(allow_null=True)
    control = inline_serializer("EpisodeControlOutput", {"username": serializers.CharField()}, allow_null=True,
                                help_text="The one person steering the episode, when someone is.")
    pending_index = serializers.IntegerField(allow_null=True, help_text="The proposal waiting for a decision.")
    human_control = serializers.BooleanField(help_text="A person has taken over acting.")
    n_interventions = serializers.IntegerField()
    n_void = serializers.IntegerField()
    review_status = serializers.ChoiceField(choices=ReviewStatus.values)
    review_summary = ReviewSummaryOutput()
    review_reason = serializers.CharField(help_text="Why the episode waits for a review before it is routed: the "
                                                    "person's outcome and the task's check disagree.")
    instruction = serializers.CharField(help_text="What the task asks, as the environment gave it for this seed.")
    comment = serializers.CharField(help_text="What the person wrote when they finished the episode.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queue = EpisodeQueueOutput(allow_null=True, help_text="Null unless the episode is queued.")
    branch_of = inline_serializer("BranchOfOutput", {"episode": serializers.IntegerField(),
                                                     "step": serializers.IntegerField()}, allow_null=True,
                                  help_text="Where a branch branched from: its parent and the step it acts on anew.")

    def to_representation(self, episode):
        return episodes.episode_payload(episode)


class ActionOutput(serializers.Serializer):
    """An action as the parser stores it: `click(x=120, y=48)` is {"name": "click", "args": {"x": 120, "y": 48}}."""

    name = serializers.CharField()
    args = serializers.DictField()


class TurnOutput(serializers.Serializer):
    """The model's turn that a person overrode, as stored (episodes.turn_payload)."""

    thought = serializers.CharField(required=False)
    action = ActionOutput(required=False, allow_null=True)
    action_text = serializers.CharField(required=False)
    raw = serializers.CharField(required=False)
    void_reason = serializers.CharField(required=False, allow_null=True)


class RejectionOutput(serializers.Serializer):
    """A proposal of the model that a person rejected before its step ran (the model was asked again)."""

    attempt = serializers.IntegerField(help_text="1 for the step's first proposal, 2 for the one after it...")
    thought = serializers.CharField()
    action = ActionOutput(allow_null=True)
    action_text = serializers.CharField()
    void_reason = serializers.CharField()
    reason = serializers.CharField(help_text="Why, in the person's words (the model read it).")
    action_format = serializers.ChoiceField(choices=list(FORMATS))
    repeated = serializers.BooleanField(help_text="Its action had been rejected at this step already.")
    rejected_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)


class StepOutput(serializers.Serializer):
    index = serializers.IntegerField()
    actor = serializers.ChoiceField(choices=Actor.values)
    thought = serializers.CharField()
    action = ActionOutput(allow_null=True)
    action_text = serializers.CharField()
    void = serializers.BooleanField()
    void_reason = serializers.CharField()
    proposal = TurnOutput(allow_null=True, help_text="What the model proposed, for a step a person edited or took.")
    correction = serializers.ChoiceField(choices=Correction.values)
    action_format = serializers.ChoiceField(choices=list(FORMATS))
    rejections = RejectionOutput(many=True, help_text="The proposals a person rejected first, oldest first.")
    reward = serializers.FloatField()
    done = serializers.BooleanField()
    screenshot_url = serializers.CharField()
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    url = serializers.CharField()
    human_thought = serializers.CharField()
    episode = serializers.IntegerField()
    polished_thought = serializers.CharField()
    polish_state = serializers.ChoiceField(choices=PolishState.values)
    polish_error = serializers.CharField()
    info = serializers.DictField(help_text="What the env said of the step (an error, a command's exit code...).")
    timings = serializers.DictField()
    created_at = serializers.DateTimeField(allow_null=True)


class EpisodeDetailOutput(EpisodeOutput):
    steps = StepOutput(many=True)
    last_seq = serializers.IntegerField()

    def to_representation(self, episode):
        data = episodes.episode_payload(episode)
        data["steps"] = [episodes.step_payload(step) for step in episodes.steps_with_rejections(episode)]
        data["last_seq"] = episode.last_seq
        return data


class EpisodesStartInput(StrictSerializer):
    task = serializers.IntegerField()
    seeds = serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=1, max_length=500)
    mode = serializers.ChoiceField(choices=["autonomous", "supervised"], default="autonomous")


EPISODE_LIST_PARAMETERS = [OpenApiParameter(name, str) for name in (
    "project", "task", "split", "checkpoint", "mode", "status", "outcome", "reward_min", "reward_max",
    "has_interventions", "has_void", "disagreement", "annotator", "review_status", "created_after", "created_before",
    "ordering")]


def _episodes_listed(request):
    """The episodes the review list shows for these query parameters (membership, project, filters)."""
    episodes = selectors.episodes_for_user(user=request.user)
    params = request.query_params
    if params.get("project"):
        try:
            project_id = int(params["project"])
        except ValueError:
            raise ApplicationError("'project' must be a project id.", errors={"project": ["Not a number."]})
        selectors.project_for_user(user=request.user, project_id=project_id)
        episodes = episodes.filter(project_id=project_id)
    return selectors.episodes_filter(episodes, params)


class EpisodeListApi(APIView):
    """The episodes a person may see, filtered for review; keyset-paginated."""

    @extend_schema(operation_id="episodes_list", parameters=EPISODE_LIST_PARAMETERS,
                   responses={200: keyset_page(EpisodeOutput, "EpisodePage")})
    def get(self, request):
        episodes = _episodes_listed(request).select_related("controller")
        return paginate(self, episodes, EpisodeOutput, ordering=request.query_params.get("ordering") or "-id")


class EpisodeNeighboursApi(APIView):
    """The previous and next episode around this one in the review list with the same filters and ordering."""

    @extend_schema(parameters=EPISODE_LIST_PARAMETERS, responses={200: inline_serializer("EpisodeNeighboursOutput", {
        "previous": serializers.IntegerField(allow_null=True), "next": serializers.IntegerField(allow_null=True)})})
    def get(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        listed = _episodes_listed(request).filter(project_id=episode.project_id)
        return Response(selectors.episode_neighbours(listed, episode=episode,
                                                     ordering=request.query_params.get("ordering") or "-id"))


class EpisodesStartApi(APIView):
    """Start episodes: one per seed, on a task of this project."""

    @extend_schema(request=EpisodesStartInput, responses={201: results_of(EpisodeOutput, "EpisodesStarted")})
    def post(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        data = EpisodesStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        if data.validated_data["mode"] == "autonomous" and not selectors.role_at_least(role, Role.MANAGER):
            raise ApplicationError("Starting autonomous batches needs the manager role; start a supervised episode instead.",
                                   status=403)
        task = project.tasks.filter(pk=data.validated_data["task"]).first()
        if task is None:
            raise ApplicationError("No such task in this project.", status=404, errors={"task": ["Unknown task."]})
        started = episodes.episodes_start(project=project, task=task, seeds=data.validated_data["seeds"],
                                          mode=data.validated_data["mode"], actor=request.user)
        started = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").filter(pk__in=[e.pk for e in started])
        return Response({"results": EpisodeOutput(started, many=True).data}, status=status.HTTP_201_CREATED)


class EpisodeDetailApi(APIView):
    @extend_schema(responses={200: EpisodeDetailOutput})
    def get(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return Response(EpisodeDetailOutput(episode).data)


class EpisodeResumeApi(APIView):
    @extend_schema(request=None, responses={202: EpisodeOutput})
    def post(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.ANNOTATOR)
        episode = episodes.episode_resume(episode=episode, actor=request.user)
        return Response(EpisodeOutput(episode).data, status=status.HTTP_202_ACCEPTED)


class EpisodeBranchInput(StrictSerializer):
    step = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=["autonomous", "supervised"], default="supervised")


class EpisodeBranchApi(APIView):
    """Branches of an episode: GET lists them; POST queues a new one at a step (episodes.episode_branch).
    Permitted as starting an episode is: annotators branch supervised, autonomous needs the manager role."""

    @extend_schema(operation_id="episodes_branch_list", responses={200: results_of(EpisodeOutput, "EpisodeBranches")})
    def get(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return Response({"results": EpisodeOutput(episodes.branches_of(episode), many=True).data})

    @extend_schema(request=EpisodeBranchInput, responses={201: EpisodeOutput})
    def post(self, request, episode_id: int):
        episode, role = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.ANNOTATOR)
        data = EpisodeBranchInput(data=request.data)
        data.is_valid(raise_exception=True)
        if data.validated_data["mode"] == "autonomous" and not selectors.role_at_least(role, Role.MANAGER):
            raise ApplicationError("Branching into an autonomous episode needs the manager role; branch a supervised "
                                   "one instead.", status=403)
        branch = episodes.episode_branch(parent=episode, step=data.validated_data["step"],
                                         mode=data.validated_data["mode"], actor=request.user)
        branch = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").get(pk=branch.pk)
        return Response(EpisodeOutput(branch).data, status=status.HTTP_201_CREATED)


class StepScreenshotApi(APIView):
    """Screenshots are files in storage, served only after a membership check."""

    @extend_schema(responses={(200, "image/jpeg"): bytes})
    def get(self, request, episode_id: int, index: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        name = Step.objects.filter(episode=episode, index=index).values_list("screenshot", flat=True).first()
        if not name:
            raise ApplicationError("This step has no screenshot.", status=404)
        response = FileResponse(default_storage.open(name, "rb"), content_type="image/jpeg")
        response["Cache-Control"] = "private, max-age=86400, immutable"
        return response


class ProposalScreenshotApi(APIView):
    """The screen a proposal was made on (stored with its `step.proposed` event)."""

    @extend_schema(responses={(200, "image/jpeg"): bytes})
    def get(self, request, episode_id: int, index: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        name = (Event.objects.filter(episode=episode, type="step.proposed", payload__index=index)
                .order_by("-seq").values_list("payload__screenshot", flat=True).first())
        if not name:
            raise ApplicationError("No screenshot for that proposal.", status=404)
        response = FileResponse(default_storage.open(name, "rb"), content_type="image/jpeg")
        response["Cache-Control"] = "private, max-age=86400, immutable"
        return response


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
    line kept), with how many lines the trainer reported and the widest gap between kept ones (training.py thins a
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
        run = training.run_create(project=project, snapshot=snapshot, algorithm=data.validated_data.get("algorithm"),
                                  init_checkpoint=init, max_steps=data.validated_data.get("max_steps"),
                                  max_epochs=data.validated_data.get("max_epochs", training.DEFAULT_MAX_EPOCHS),
                                  actor=request.user)
        return Response(for_role(run_output(run), role), status=status.HTTP_202_ACCEPTED)


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
        snapshot = snapshots.snapshot_create(project=project, actor=request.user, **data.validated_data)
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
        return Response({"rows": snapshots.snapshot_preview(snapshot, limit)})


class SnapshotExportApi(APIView):
    """The export bundle, streamed as it is zipped: constant memory and no request timeout, whatever the size."""

    @extend_schema(responses={(200, "application/zip"): bytes})
    def get(self, request, snapshot_id: int):
        snapshot = _snapshot_for(request, snapshot_id)
        stream = snapshots.export_stream(snapshot)
        first = next(stream)  # raises the "not ready" error before any byte is sent
        response = StreamingHttpResponse(itertools.chain([first], stream), content_type="application/zip")
        slug = f"{snapshot.project.slug}-{snapshot.kind}-{snapshot.pk}"
        response["Content-Disposition"] = f'attachment; filename="{slug}.zip"'
        response["X-Snapshot-Sha256"] = snapshot.sha256
        return response


# --- the judge (managers) ----------------------------------------------------------------------------------
class JudgeSettingsOutput(serializers.Serializer):
    """The project's judge (judge.judge_settings_of); PATCH takes any of these fields."""

    enabled = serializers.BooleanField(help_text="Judge every episode that finishes.")
    backend = serializers.ChoiceField(choices=list(judge.BACKENDS))
    samples = serializers.IntegerField(help_text="How many times the judge is asked; the majority wins and its "
                                                 "share is the confidence.")
    temperature = serializers.FloatField()
    screenshots = serializers.IntegerField(help_text="How many of the episode's last screenshots the judge sees.")
    model = serializers.CharField()
    base_url = serializers.CharField()
    timeout_seconds = serializers.FloatField(allow_null=True)
    retries = serializers.IntegerField(allow_null=True)
    answers = serializers.ListField(child=serializers.CharField())


class JudgeVoteOutput(serializers.Serializer):
    verdict = serializers.ChoiceField(choices=JudgeVerdict.values)
    reason = serializers.CharField()
    raw = serializers.CharField()


class JudgementOutput(serializers.Serializer):
    """What judge.judgement_payload builds. A verdict "" is none: the judge could not be read, or its samples
    tied."""

    id = serializers.IntegerField()
    episode = serializers.IntegerField()
    verdict = serializers.ChoiceField(choices=JudgeVerdict.values)
    reason = serializers.CharField()
    confidence = serializers.FloatField(allow_null=True, help_text="Share of the samples that voted the verdict.")
    votes = JudgeVoteOutput(many=True)
    judge = serializers.ChoiceField(choices=list(judge.BACKENDS))
    model = serializers.CharField()
    config = serializers.DictField(help_text="The judge settings it ran with.")
    latest = serializers.BooleanField()
    created_by = UserRef(allow_null=True)
    created_at = serializers.DateTimeField()


class ConfusionOutput(serializers.Serializer):
    judge_success_review_accept = serializers.IntegerField()
    judge_success_review_reject = serializers.IntegerField()
    judge_failure_review_accept = serializers.IntegerField()
    judge_failure_review_reject = serializers.IntegerField()


class JudgeAgreementOutput(serializers.Serializer):
    episodes = serializers.IntegerField()
    agreement = serializers.FloatField(allow_null=True)
    kappa = serializers.FloatField(allow_null=True)
    confusion = ConfusionOutput()


class TaskJudgeAgreementOutput(JudgeAgreementOutput):
    task = serializers.CharField()


class CalibrationOutput(JudgeAgreementOutput):
    judged = serializers.IntegerField()
    no_verdict = serializers.IntegerField()
    not_reviewed = serializers.IntegerField()
    tasks = TaskJudgeAgreementOutput(many=True)


QUEUED_OUTPUT = inline_serializer("JudgementsQueued", {
    "queued": serializers.ListField(child=serializers.IntegerField())})


@extend_schema_view(get=extend_schema(responses={200: JudgeSettingsOutput}),
                    patch=extend_schema(request=dict, responses={200: JudgeSettingsOutput}))
class JudgeSettingsApi(SettingsSectionApi):
    """The project's judge: whether it judges every finished episode, its backend, samples and temperature."""
    section = judge.JUDGE_SETTINGS


class JudgeRequestInput(StrictSerializer):
    episodes = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=2000,
                                     help_text="Episode ids to judge.")
    filter = serializers.DictField(required=False, help_text="Or the review list's filters (task, split, checkpoint, "
                                                             "mode, outcome, review_status, ...): every finished "
                                                             "episode that matches.")

    def validate(self, attrs):
        if ("episodes" in attrs) == ("filter" in attrs):
            raise serializers.ValidationError("Give either 'episodes' (ids) or 'filter', not both or neither.")
        return attrs


class JudgeRequestApi(APIView):
    """Judge a list or a filtered set of the project's finished episodes on the `default` queue."""

    @extend_schema(request=JudgeRequestInput, responses={202: QUEUED_OUTPUT})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = JudgeRequestInput(data=request.data)
        data.is_valid(raise_exception=True)
        if "filter" in data.validated_data:
            given = data.validated_data["filter"]
            known = {p.name for p in EPISODE_LIST_PARAMETERS} - {"project", "ordering", "status"}
            unknown = ", ".join(sorted(set(given) - known))
            if unknown:
                raise ApplicationError(f"Unknown filter(s): {unknown}; use {', '.join(sorted(known))}.",
                                       errors={"filter": [f"Unknown: {unknown}."]})
            params = {k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in given.items()}
            listed = selectors.episodes_filter(project.episodes.filter(status="finished"), params)
            ids = list(listed.order_by("-id").values_list("pk", flat=True)[:judge.MAX_BATCH + 1])
        else:
            ids = data.validated_data["episodes"]
        queued = judge.judge_request(project=project, actor=request.user, episode_ids=ids)
        return Response({"queued": queued}, status=status.HTTP_202_ACCEPTED)


class EpisodeJudgementsApi(APIView):
    """An episode's judgements, newest first (GET), or judge it again now (POST, queued)."""

    @extend_schema(responses={200: results_of(JudgementOutput, "JudgementList", next_link=True)})
    def get(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        rows = episode.judgements.select_related("created_by")[:50]
        return Response({"results": [judge.judgement_payload(j) for j in rows], "next": None})

    @extend_schema(request=None, responses={202: QUEUED_OUTPUT})
    def post(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        if episode.status != "finished":
            raise ApplicationError(f"Episode {episode.pk} is {episode.status}; only finished episodes are judged.",
                                   status=409)
        queued = judge.judge_request(project=episode.project, actor=request.user, episode_ids=[episode.pk])
        return Response({"queued": queued}, status=status.HTTP_202_ACCEPTED)


class JudgeCalibrationApi(APIView):
    """How far the judge agrees with the reviewers: share, Cohen's kappa and the confusion table, per task too."""

    @extend_schema(responses={200: CalibrationOutput})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response(judge.calibration(project=project))
