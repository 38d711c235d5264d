"""Account endpoints (session login for the browser, tokens for scripts) and the health check."""
from __future__ import annotations

import logging
import time
import uuid

from asgiref.sync import async_to_sync
from celery import __version__ as celery_version
from django.conf import settings
from django.contrib.auth import login, logout
from django.db import connection
from django.views.decorators.csrf import ensure_csrf_cookie
from django.utils.decorators import method_decorator
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import LimitedCharField, OpenRecord, StrictSerializer
from webapp import auth
from webapp.celery import app as celery_app

log = logging.getLogger(__name__)


class UserOutput(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()
    is_staff = serializers.BooleanField()


class CredentialsInput(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)


def _client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "")


@method_decorator(ensure_csrf_cookie, name="dispatch")
class SessionApi(APIView):
    """The browser's login: GET who am I (and a CSRF cookie), POST log in, DELETE log out."""

    permission_classes = [AllowAny]

    @extend_schema(responses={200: inline_serializer("SessionOutput", {"user": UserOutput()})})
    def get(self, request):
        if not request.user.is_authenticated:
            return Response({"detail": "Not logged in."}, status=status.HTTP_401_UNAUTHORIZED)
        return Response({"user": UserOutput(request.user).data})

    @extend_schema(request=CredentialsInput, responses={200: inline_serializer("SessionLogin", {"user": UserOutput()})})
    def post(self, request):
        auth.SessionAuthentication().enforce_csrf(request)  # login CSRF too, not only for logged-in users
        data = CredentialsInput(data=request.data)
        data.is_valid(raise_exception=True)
        user = auth.credentials_check(**data.validated_data, ip=_client_ip(request))
        login(request._request, user)
        return Response({"user": UserOutput(user).data})

    @extend_schema(responses={204: None})
    def delete(self, request):
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenCreateInput(CredentialsInput):
    name = LimitedCharField("token_name", required=False, allow_blank=True)


class TokenApi(APIView):
    """Tokens for scripts: POST with a username and password returns {"token"}; DELETE with the token revokes it."""

    permission_classes = [AllowAny]
    authentication_classes = []  # credentials in the body; a stale Authorization header must not block getting a new token

    @extend_schema(request=TokenCreateInput, responses={201: inline_serializer("TokenOutput", {
        "token": serializers.CharField(), "expires_at": serializers.DateTimeField()})})
    def post(self, request):
        data = TokenCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        user = auth.credentials_check(username=data.validated_data["username"], password=data.validated_data["password"],
                                      ip=_client_ip(request))
        token, raw = auth.token_create(user=user, name=data.validated_data.get("name", ""))
        return Response({"token": raw, "expires_at": token.expires_at}, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def delete(self, request):
        raw = auth.bearer_from_header(request.META.get("HTTP_AUTHORIZATION"))
        user = auth.user_for_token(raw) if raw else None
        if user is None:
            return Response({"detail": "Send the token to revoke as Authorization: Bearer <token>."}, status=401)
        auth.token_revoke(user=user, raw=raw)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _check(fn):
    started = time.perf_counter()
    try:
        result = {"ok": True, **fn()}
    except Exception as exc:  # a health check reports every failure instead of raising
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def _database():
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return {"version": cursor.fetchone()[0]}


def _redis():
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
        return {"version": client.info("server")["redis_version"]}
    finally:
        client.close()


def _channel_layer():
    from channels import __version__ as channels_version
    from channels.layers import get_channel_layer

    layer = get_channel_layer()

    async def roundtrip():
        import asyncio

        channel = await layer.new_channel()
        token = uuid.uuid4().hex
        await layer.send(channel, {"type": "health.ping", "token": token})
        message = await asyncio.wait_for(layer.receive(channel), timeout=2)
        if message.get("token") != token:
            raise RuntimeError("the channel layer returned another message")

    async_to_sync(roundtrip)()
    return {"version": channels_version}


def _celery():
    replies = celery_app.control.ping(timeout=1.0)
    workers = sorted(name for reply in replies for name in reply)
    if not workers:
        raise RuntimeError("no Celery worker answered a ping within 1 s")
    return {"version": celery_version, "workers": workers}


class HealthCheckOutput(OpenRecord):
    ok = serializers.BooleanField()
    ms = serializers.FloatField()
    error = serializers.CharField(required=False, help_text="What failed, when it did.")
    version = serializers.CharField(required=False)
    workers = serializers.ListField(child=serializers.CharField(), required=False)


class HealthOutput(serializers.Serializer):
    status = serializers.ChoiceField(choices=["ok", "degraded"])
    checks = inline_serializer("HealthChecks", {name: HealthCheckOutput() for name in
                                                ("database", "redis", "channel_layer", "celery")})
    detail = serializers.CharField(required=False, help_text="Degraded: what failed, in one line.")


class HealthApi(APIView):
    """Real checks of PostgreSQL, Redis, the channel layer and a live Celery worker."""

    permission_classes = [AllowAny]
    authentication_classes = []

    @extend_schema(responses={200: HealthOutput, 503: HealthOutput})
    def get(self, request):
        checks = {"database": _check(_database), "redis": _check(_redis), "channel_layer": _check(_channel_layer),
                  "celery": _check(_celery)}
        healthy = all(c["ok"] for c in checks.values())
        body = {"status": "ok" if healthy else "degraded", "checks": checks}
        if not healthy:  # the same {"detail"} message every other error carries
            body["detail"] = "Degraded: " + "; ".join(f"{name}: {c['error']}" for name, c in checks.items() if not c["ok"])
        _log_health_change(healthy, body.get("detail", ""))
        return Response(body, status=200 if healthy else 503)


_last_health: bool | None = None  # this process's last answer; None before the first


def _log_health_change(healthy: bool, detail: str) -> None:
    """One log line when the answer turns, not one a probe: load balancers ask every few seconds, and
    a 503 while the processes start is expected (django.request's per-503 line is filtered out)."""
    global _last_health
    if _last_health is not None and healthy != _last_health:
        if healthy:
            log.info("health: ok again")
        else:
            log.warning("health: %s", detail)
    _last_health = healthy


class MeApi(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: UserOutput})
    def get(self, request):
        return Response(UserOutput(request.user).data)
