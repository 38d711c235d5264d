"""REST for the judge: its settings, judging episodes, their judgements, and its agreement with reviews (managers)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import judge
from core.api import StrictSerializer, UserRef, results_of
from core.errors import ApplicationError
from projects import selectors
from projects.api_settings import SettingsSectionApi
from projects.models import Role
from rollouts import selectors as rollout_selectors
from rollouts.api_episodes import EPISODE_LIST_PARAMETERS
from rollouts.models import JudgeVerdict


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
            listed = rollout_selectors.episodes_filter(project.episodes.filter(status="finished"), params)
            ids = list(listed.order_by("-id").values_list("pk", flat=True)[:judge.MAX_BATCH + 1])
        else:
            ids = data.validated_data["episodes"]
        queued = judge.judge_request(project=project, actor=request.user, episode_ids=ids)
        return Response({"queued": queued}, status=status.HTTP_202_ACCEPTED)


class EpisodeJudgementsApi(APIView):
    """An episode's judgements, newest first (GET), or judge it again now (POST, queued)."""

    @extend_schema(responses={200: results_of(JudgementOutput, "JudgementList", next_link=True)})
    def get(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        rows = episode.judgements.select_related("created_by")[:50]
        return Response({"results": [judge.judgement_payload(j) for j in rows], "next": None})

    @extend_schema(request=None, responses={202: QUEUED_OUTPUT})
    def post(self, request, episode_id: int):
        episode, _ = rollout_selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
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
