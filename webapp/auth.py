"""Authentication: bearer tokens for scripts, sessions (with CSRF) for the browser, login throttling."""
from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import authenticate
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions

from core.errors import ApplicationError
from core.limits import check_length
from core.models import AuditEntry
from webapp.models import ApiToken, token_digest


def user_for_token(raw: str):
    """The active user a raw bearer token belongs to, or None (unknown, expired, revoked)."""
    try:
        token = ApiToken.objects.select_related("user").get(digest=token_digest(raw))
    except ApiToken.DoesNotExist:
        return None
    now = timezone.now()
    if token.revoked_at or token.expires_at <= now or not token.user.is_active:
        return None
    if not token.last_used_at or now - token.last_used_at > timedelta(minutes=1):
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def bearer_from_header(value: str | bytes | None) -> str | None:
    if not value:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    scheme, _, raw = value.partition(" ")
    return raw.strip() if scheme.lower() == "bearer" and raw.strip() else None


class BearerTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION")
        if not header:
            return None
        raw = bearer_from_header(header)
        if raw is None:
            raise exceptions.AuthenticationFailed("The Authorization header must be 'Bearer <token>'.")
        user = user_for_token(raw)
        if user is None:
            raise exceptions.AuthenticationFailed(
                "This token is unknown, expired or revoked; get a new one from POST /api/v1/auth/token."
            )
        return user, raw

    def authenticate_header(self, request):
        return 'Bearer realm="loupe"'


class SessionAuthentication(authentication.SessionAuthentication):
    """DRF's session auth (CSRF enforced on unsafe methods)."""


def _throttle_key(username: str, ip: str) -> str:
    return f"login-attempts:{username.lower()}:{ip}"


def credentials_check(*, username: str, password: str, ip: str):
    """The user for these credentials; raises ApplicationError 401, or 429 after too many failures."""
    key = _throttle_key(username, ip)
    attempts = cache.get(key, 0)
    if attempts >= settings.LOUPE_LOGIN_ATTEMPTS:
        raise ApplicationError("Too many failed logins; wait five minutes and try again.", status=429)
    user = authenticate(username=username, password=password)
    if user is None:
        cache.set(key, attempts + 1, timeout=300)
        raise ApplicationError("Wrong username or password.", status=401)
    cache.delete(key)
    return user


@transaction.atomic
def token_create(*, user, name: str = "") -> tuple[ApiToken, str]:
    check_length("token_name", name, field="name")
    raw = secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        digest=token_digest(raw),
        prefix=raw[:8],
        name=name,
        expires_at=timezone.now() + timedelta(days=settings.LOUPE_TOKEN_TTL_DAYS),
    )
    AuditEntry.objects.create(actor=user, action="token.create", target=f"token:{token.pk}")
    return token, raw


@transaction.atomic
def token_revoke(*, user, raw: str) -> None:
    updated = ApiToken.objects.filter(user=user, digest=token_digest(raw), revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if not updated:
        raise ApplicationError("No active token of yours matches.", status=404)
    AuditEntry.objects.create(actor=user, action="token.revoke", target=f"token:{raw[:8]}")
