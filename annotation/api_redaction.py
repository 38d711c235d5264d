"""REST for a project's redaction policy: what it is and finds (managers), and changing it (managers; switching it
off: admins, with a reason)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation import redaction
from core.api import StrictSerializer
from projects import selectors
from projects.models import Role


class RedactionPolicyField(serializers.Serializer):
    enabled = serializers.BooleanField()
    kinds = serializers.ListField(child=serializers.CharField())
    patterns = serializers.ListField(child=serializers.ListField(child=serializers.CharField()),
                                     help_text="[name, regular expression] pairs; a hit is labelled with the name.")
    words = serializers.ListField(child=serializers.CharField(), help_text="Names and other words, matched whole.")
    region = serializers.CharField(help_text="How a phone number without a country code is read (US, DE, ...).")
    keep_originals = serializers.BooleanField(help_text="What redaction hides is kept apart for the project's admins "
                                                        "(each read audited); switching it on needs an admin.")


class RedactionExample(serializers.Serializer):
    episode = serializers.IntegerField()
    step = serializers.IntegerField()
    field = serializers.CharField(help_text="element, url, screen_text, thought, action or spoken")
    before = serializers.CharField(allow_blank=True)
    match = serializers.CharField()
    after = serializers.CharField(allow_blank=True)
    hidden = serializers.BooleanField(help_text="The value was hidden when it was stored: match is its label, and a "
                                                "wrong-hit mark names it in its context (before + match + after).")


class RedactionCount(serializers.Serializer):
    kind = serializers.CharField()
    hits = serializers.IntegerField()
    where = serializers.DictField(child=serializers.IntegerField())
    examples = RedactionExample(many=True)
    wrong_hits = serializers.IntegerField(help_text="Hits whose text a reviewer marked as no personal data.")
    missed = serializers.IntegerField(help_text="Misses reviewers marked.")
    precision = serializers.FloatField(allow_null=True)
    recall = serializers.FloatField(allow_null=True, help_text="Against the marked misses.")


class RedactionOutput(serializers.Serializer):
    policy = RedactionPolicyField()
    digest = serializers.CharField(help_text="Identifies the policy; part of a snapshot's key and lineage.")
    kinds = serializers.ListField(child=serializers.CharField(), help_text="Every kind a policy may name.")
    episodes = serializers.IntegerField(help_text="How many recent episodes the counts are over.")
    counts = RedactionCount(many=True)


class RedactionSetInput(StrictSerializer):
    policy = serializers.DictField(help_text="The whole policy: enabled, kinds, patterns, words, region (each "
                                             "optional; the defaults redact every kind).")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500,
                                   help_text="Why; required to switch redaction off.")


class RedactionMarkInput(StrictSerializer):
    kind = serializers.CharField(max_length=32)
    verdict = serializers.ChoiceField(choices=["wrong_hit", "missed"])
    text = serializers.CharField(max_length=300)
    episode = serializers.IntegerField(required=False, allow_null=True)
    step = serializers.IntegerField(required=False, allow_null=True, min_value=0)


class RedactionMarkApi(APIView):
    @extend_schema(request=RedactionMarkInput, responses={201: RedactionOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = RedactionMarkInput(data=request.data)
        data.is_valid(raise_exception=True)
        mark = data.validated_data
        redaction.redaction_mark_add(project=project, reviewer=request.user, kind=mark["kind"],
                                     verdict=mark["verdict"], text=mark["text"], episode_id=mark.get("episode"),
                                     step_index=mark.get("step"))
        return Response(redaction.redaction_overview(project=project), status=201)


class RedactionApi(APIView):
    @extend_schema(responses={200: RedactionOutput})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        return Response(redaction.redaction_overview(project=project))

    @extend_schema(request=RedactionSetInput, responses={200: RedactionOutput})
    def put(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = RedactionSetInput(data=request.data)
        data.is_valid(raise_exception=True)
        redaction.redaction_policy_set(project=project, actor=request.user, role=role,
                                       settings=data.validated_data["policy"],
                                       reason=data.validated_data.get("reason", ""))
        return Response(redaction.redaction_overview(project=project))
