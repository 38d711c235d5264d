"""REST for episodes: listing and filtering, starting, reading one with its steps, resuming, branching, and the
screenshots of steps and proposals."""
from __future__ import annotations

from django.core.files.storage import default_storage
from django.http import FileResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from agent.formats import FORMATS
from core.api import StrictSerializer, UserRef, keyset_page, results_of
from core.errors import ApplicationError
from projects import selectors
from projects.api import paginate
from projects.models import Role, Split
from rollouts import episodes, steps
from rollouts import selectors as rollout_selectors
from rollouts.models import (
    CONFIDENCE_HELP,
    MARGIN_HELP,
    Actor,
    Correction,
    Episode,
    EpisodeStatus,
    Event,
    Mode,
    Outcome,
    PolishState,
    ReviewStatus,
    Step,
)


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
    rl_run = serializers.CharField(help_text="The RL run that played it through the environment service; empty for "
                                             "every other episode.")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    queue = EpisodeQueueOutput(allow_null=True, help_text="Null unless the episode is queued.")
    branch_of = inline_serializer("BranchOfOutput", {"episode": serializers.IntegerField(),
                                                     "step": serializers.IntegerField()}, allow_null=True,
                                  help_text="Where a branch branched from: its parent and the step it acts on anew.")
    ask = inline_serializer("EpisodeAskOutput", {"reason": serializers.CharField(),
                                                 "asked_at": serializers.DateTimeField()}, allow_null=True, required=False,
                            help_text="Set while the model waits for a person about a proposal it is unsure of.")

    def to_representation(self, episode):
        return episodes.episode_payload(episode)


class ActionOutput(serializers.Serializer):
    """An action as the parser stores it: `click(x=120, y=48)` is {"name": "click", "args": {"x": 120, "y": 48}}."""

    name = serializers.CharField()
    args = serializers.DictField()


class TurnOutput(serializers.Serializer):
    """The model's turn that a person overrode, as stored (steps.turn_payload)."""

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
    confidence = serializers.FloatField(allow_null=True, required=False, help_text=CONFIDENCE_HELP)
    confidence_margin = serializers.FloatField(allow_null=True, required=False, help_text=MARGIN_HELP)
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
    confidence = serializers.FloatField(allow_null=True, required=False, help_text=CONFIDENCE_HELP)
    confidence_margin = serializers.FloatField(allow_null=True, required=False, help_text=MARGIN_HELP)
    learned = inline_serializer("StepLearnedOutput", {
        "cycle": serializers.IntegerField(), "learned": serializers.BooleanField(),
        "held_out": serializers.BooleanField()}, many=True, required=False,
        help_text="A corrected step: per cycle that trained on it (or held it out), whether its candidate learned it.")
    created_at = serializers.DateTimeField(allow_null=True)


class EpisodeDetailOutput(EpisodeOutput):
    steps = StepOutput(many=True)
    last_seq = serializers.IntegerField()

    def to_representation(self, episode):
        data = episodes.episode_payload(episode)
        data["steps"] = [steps.step_payload(step) for step in steps.steps_with_rejections(episode)]
        data["last_seq"] = episode.last_seq
        return data


class EpisodesStartInput(StrictSerializer):
    task = serializers.IntegerField()
    seeds = serializers.ListField(child=serializers.IntegerField(min_value=0), min_length=1, max_length=500)
    mode = serializers.ChoiceField(choices=["autonomous", "supervised"], default="autonomous")


EPISODE_LIST_PARAMETERS = [OpenApiParameter(name, str) for name in (
    "project", "task", "split", "checkpoint", "mode", "status", "outcome", "reward_min", "reward_max",
    "has_interventions", "has_void", "disagreement", "annotator", "review_status", "created_after", "created_before",
    "rl_run", "ordering")]


def _episodes_listed(request):
    """The episodes the review list shows for these query parameters (membership, project, filters)."""
    episodes = rollout_selectors.episodes_for_user(user=request.user)
    params = request.query_params
    if params.get("project"):
        try:
            project_id = int(params["project"])
        except ValueError:
            raise ApplicationError("'project' must be a project id.", errors={"project": ["Not a number."]})
        selectors.project_for_user(user=request.user, project_id=project_id)
        episodes = episodes.filter(project_id=project_id)
    return rollout_selectors.episodes_filter(episodes, params)


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
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        listed = _episodes_listed(request).filter(project_id=episode.project_id)
        return Response(rollout_selectors.episode_neighbours(listed, episode=episode,
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
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return Response(EpisodeDetailOutput(episode).data)


class EpisodeResumeApi(APIView):
    @extend_schema(request=None, responses={202: EpisodeOutput})
    def post(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.ANNOTATOR)
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
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return Response({"results": EpisodeOutput(episodes.branches_of(episode), many=True).data})

    @extend_schema(request=EpisodeBranchInput, responses={201: EpisodeOutput})
    def post(self, request, episode_id: int):
        episode, role = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.ANNOTATOR)
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
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
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
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id)
        name = (Event.objects.filter(episode=episode, type="step.proposed", payload__index=index)
                .order_by("-seq").values_list("payload__screenshot", flat=True).first())
        if not name:
            raise ApplicationError("No screenshot for that proposal.", status=404)
        response = FileResponse(default_storage.open(name, "rb"), content_type="image/jpeg")
        response["Cache-Control"] = "private, max-age=86400, immutable"
        return response
