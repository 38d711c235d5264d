"""REST for think-aloud polished into thoughts (annotation/polish.py): an episode's progress and its steps' words
and polished thoughts, editing and re-polishing a step, re-polishing an episode, and the project's polisher."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import polish
from core.api import StrictSerializer
from projects.api_settings import SettingsSectionApi
from projects.models import Role
from rollouts import selectors
from rollouts.models import PolishState


class PolishSettingsOutput(serializers.Serializer):
    """The project's polisher (polish.polish_settings_of); PATCH takes any of these fields."""

    enabled = serializers.BooleanField(help_text="Polish words as they land.")
    backend = serializers.ChoiceField(choices=list(polish.BACKENDS))
    model = serializers.CharField()
    base_url = serializers.CharField()
    timeout_seconds = serializers.FloatField(allow_null=True)
    retries = serializers.IntegerField(allow_null=True)


class PolishProgressOutput(serializers.Serializer):
    steps_with_words = serializers.IntegerField()
    done = serializers.IntegerField()
    edited = serializers.IntegerField()
    queued = serializers.IntegerField()
    failed = serializers.IntegerField()
    not_polished = serializers.IntegerField(help_text="Words from before polishing was switched on.")


class StepPolishOutput(serializers.Serializer):
    """What polish.step_polish_payload builds. A state "" is no words (or not polished yet); edited: a person wrote
    it."""

    index = serializers.IntegerField()
    words = serializers.CharField(help_text="The words said during the step, raw (the step's human_thought).")
    polished_thought = serializers.CharField()
    polish_state = serializers.ChoiceField(choices=PolishState.values)
    polish_error = serializers.CharField(help_text="Why the last polish gave no thought, in plain words.")
    polished_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(help_text="The words changed after this thought was written.")
    can_edit = serializers.BooleanField(help_text="Whether you may edit it or polish it again (managers, and the "
                                                  "annotator who worked on the step).")


class EpisodePolishOutput(serializers.Serializer):
    episode = serializers.IntegerField()
    progress = PolishProgressOutput()
    can_request = serializers.BooleanField(help_text="Whether you may polish the whole episode again (managers).")
    settings = inline_serializer("EpisodePolishSettings", {
        "backend": serializers.ChoiceField(choices=list(polish.BACKENDS)), "enabled": serializers.BooleanField()})
    steps = StepPolishOutput(many=True)


@extend_schema_view(get=extend_schema(responses={200: PolishSettingsOutput}),
                    patch=extend_schema(request=dict, responses={200: PolishSettingsOutput}))
class PolishSettingsApi(SettingsSectionApi):
    """The project's polisher: whether words are polished as they land, and with which backend (managers)."""
    section = polish.POLISH_SETTINGS


class EpisodePolishApi(APIView):
    """GET: how far the episode's think-aloud is polished (done / edited / queued / failed) and each step's words and
    polished thought, with whether you may edit it. POST: polish every step with words again, except edited ones
    (managers)."""

    @extend_schema(responses={200: EpisodePolishOutput})
    def get(self, request, episode_id: int):
        episode, role = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return Response(polish.episode_polish(episode=episode, user=request.user, role=role))

    @extend_schema(request=None, responses={202: inline_serializer("EpisodePolishQueued", {
        "queued": serializers.ListField(child=serializers.IntegerField(), help_text="The steps queued."),
        "progress": PolishProgressOutput()})})
    def post(self, request, episode_id: int):
        episode, _ = selectors.episode_for_user(user=request.user, episode_id=episode_id, minimum=Role.MANAGER)
        queued = polish.episode_polish_request(episode=episode, actor=request.user)
        return Response({"queued": queued, "progress": polish.episode_polish_progress(episode)},
                        status=status.HTTP_202_ACCEPTED)


class StepPolishEditInput(StrictSerializer):
    polished_thought = serializers.CharField(allow_blank=True, trim_whitespace=True,
                                             max_length=polish.MAX_THOUGHT_CHARS,
                                             help_text="The thought as it should be; empty: no polished thought (rows "
                                                       "use the step's own thought).")


class StepPolishApi(APIView):
    """One step's polished thought. PATCH writes it (state edited, audited); POST polishes the step's words again,
    replacing an edit. Managers, and the annotator who worked on the step."""

    def _step(self, request, episode_id: int, index: int):
        episode, role = selectors.episode_for_user(user=request.user, episode_id=episode_id)
        return polish.step_of(episode=episode, index=index), role

    @extend_schema(request=StepPolishEditInput, responses={200: StepPolishOutput})
    def patch(self, request, episode_id: int, index: int):
        step, role = self._step(request, episode_id, index)
        data = StepPolishEditInput(data=request.data)
        data.is_valid(raise_exception=True)
        step = polish.step_polish_edit(step=step, user=request.user, role=role,
                                       text=data.validated_data["polished_thought"])
        return Response(polish.step_polish_payload(step, can_edit=True))

    @extend_schema(request=None, responses={202: inline_serializer("StepPolishQueued", {
        **StepPolishOutput().get_fields(),
        "queued_now": serializers.BooleanField(help_text="False: it was queued already (a second request).")})})
    def post(self, request, episode_id: int, index: int):
        step, role = self._step(request, episode_id, index)
        step, queued = polish.step_polish_request(step=step, user=request.user, role=role)
        return Response({**polish.step_polish_payload(step, can_edit=True), "queued_now": queued},
                        status=status.HTTP_202_ACCEPTED)
