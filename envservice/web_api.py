"""What the web app serves of the environment service: its hosts' capacity and how busy they are (admins only)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApplicationError
from envservice.status import SILENT_AFTER_S, hosts_status

PoolOutput = inline_serializer("EnvServicePool", {
    "kind": serializers.CharField(), "capacity": serializers.IntegerField(help_text="Envs it may hold at once."),
    "leased": serializers.IntegerField(help_text="Envs leased to RL callers now."),
    "idle": serializers.IntegerField(help_text="Envs made and waiting (warm)."),
    "warm_target": serializers.IntegerField(), "crashes": serializers.IntegerField()}, many=True)
HostOutput = inline_serializer("EnvServiceHost", {
    "host": serializers.CharField(), "address": serializers.CharField(help_text="host:port it serves on."),
    "lease_timeout_s": serializers.FloatField(), "leases": serializers.IntegerField(),
    "steps_per_minute": serializers.FloatField(allow_null=True, help_text="Steps its envs took a minute, lately."),
    "pools": PoolOutput, "reported_at": serializers.FloatField(help_text="Unix time of its last report."),
    "age_s": serializers.FloatField(),
    "silent": serializers.BooleanField(help_text=f"No report for over {SILENT_AFTER_S:g} s: gone or stuck.")},
    many=True)
KindOutput = inline_serializer("EnvServiceKind", {
    "kind": serializers.CharField(), "capacity": serializers.IntegerField(), "leased": serializers.IntegerField(),
    "idle": serializers.IntegerField()}, many=True)


class EnvServiceHostsApi(APIView):
    """Every environment service host behind this Redis: its pools' capacity, leased and warm envs, its leases and
    steps a minute; and the totals per env kind of the hosts still reporting."""

    permission_classes = [IsAuthenticated]

    @extend_schema(operation_id="envservice_hosts", responses={200: inline_serializer(
        "EnvServiceHosts", {"hosts": HostOutput, "kinds": KindOutput})})
    def get(self, request):
        if not request.user.is_staff:
            raise ApplicationError("Only admins see the environment service's hosts.", status=403)
        return Response(hosts_status())
