"""REST for asking a person when the policy is unsure (rollouts/asking.py): the confidence floor (GET members, PATCH
managers), the calibration card (managers), and the person queue (members)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from projects import selectors
from projects.api_settings import SettingsSectionApi
from projects.models import Role
from rollouts import asking


class AskSettingsOutput(serializers.Serializer):
    ask_below = serializers.FloatField(allow_null=True, help_text="An autonomous episode asks a person about a "
                                                                  "proposal whose confidence is under this; null: never.")


class CalibrationBucketOutput(serializers.Serializer):
    low = serializers.FloatField()
    high = serializers.FloatField()
    steps = serializers.IntegerField(help_text="Proposals a person decided with a confidence in [low, high).")
    good = serializers.FloatField(allow_null=True, help_text="Share of them a person let run as proposed.")


class CalibrationFloorOutput(serializers.Serializer):
    floor = serializers.FloatField()
    asked = serializers.FloatField(allow_null=True, help_text="Share of recent steps whose confidence is under it.")
    good_above = serializers.FloatField(allow_null=True, help_text="Share of decided proposals at or above it that "
                                                                   "were good.")


class AskCalibrationOutput(serializers.Serializer):
    reviewed = serializers.IntegerField(help_text="Decided proposals the buckets count (steps and rejections).")
    steps = serializers.IntegerField(help_text="Recent steps with a confidence (the floors' shares count these).")
    buckets = CalibrationBucketOutput(many=True)
    floors = CalibrationFloorOutput(many=True)
    suggested = serializers.FloatField(allow_null=True)
    good_enough = serializers.FloatField()
    ask_below = serializers.FloatField(allow_null=True)


class AskWaitingOutput(serializers.Serializer):
    episode = serializers.IntegerField()
    task = serializers.CharField()
    seed = serializers.IntegerField()
    reason = serializers.CharField(help_text='Why the model asks, e.g. "confidence 0.31 < 0.5".')
    step = serializers.IntegerField(allow_null=True)
    asked_at = serializers.DateTimeField()
    waited_seconds = serializers.FloatField()
    control = serializers.CharField(allow_null=True, help_text="Who answers it now, if anyone.")


@extend_schema_view(get=extend_schema(responses={200: AskSettingsOutput}),
                    patch=extend_schema(request=AskSettingsOutput, responses={200: AskSettingsOutput}))
class AskSettingsApi(SettingsSectionApi):
    """The project's confidence floor under which autonomous episodes ask a person (off by default)."""
    section, read_role = asking.ASK_SECTION, Role.ANNOTATOR


class AskCalibrationApi(APIView):
    """How often proposals at each confidence were good, what share each floor would ask about, a suggested floor."""

    @extend_schema(responses={200: AskCalibrationOutput})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response(asking.calibration(project=project))


class AsksWaitingApi(APIView):
    """The person queue: autonomous episodes paused on a proposal the policy was unsure of, longest wait first."""

    @extend_schema(responses={200: AskWaitingOutput(many=True)})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ANNOTATOR)
        return Response(asking.asks_waiting(project=project))
