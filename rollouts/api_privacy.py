"""REST for what redaction hid of a stored step (rollouts/privacy.py): a project admin reads it, with a reason,
every read audited; managers and reviewers see the stored, redacted step."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import StrictSerializer
from core.errors import ApplicationError
from rollouts import privacy, selectors
from rollouts.models import Step


class StepOriginalInput(StrictSerializer):
    reason = serializers.CharField(max_length=500, help_text="Why you read what redaction hid (audited).")


class StepOriginalApi(APIView):
    @extend_schema(request=StepOriginalInput, responses={200: inline_serializer("StepOriginal", {
        "episode": serializers.IntegerField(), "step": serializers.IntegerField(),
        "fields": serializers.DictField(help_text="Each field redaction changed, as it was."),
        "screenshot": serializers.CharField(allow_null=True, help_text="The screenshot as it was (a data: URL), "
                                                                       "where boxes were filled.")})})
    def post(self, request, episode_id: int, index: int):
        episode, role = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        step = Step.objects.filter(episode=episode, index=index).only("episode_id", "index").first()
        if step is None:
            raise ApplicationError(f"Episode {episode.pk} has no step {index + 1}.", status=404)
        reason = request.data.get("reason", "") if hasattr(request.data, "get") else ""
        # the role is checked before the reason: a manager hears why not, not what to fill in
        return Response(privacy.original_read(step=step, project_id=episode.project_id, actor=request.user,
                                              role=role, reason=reason if isinstance(reason, str) else ""))
