"""WebSocket authentication: a session cookie (browsers, which always send Origin) or a bearer token
(scripts). A cookie-authenticated socket from a foreign or missing Origin is refused, which is what
stops cross-site WebSocket hijacking."""
from __future__ import annotations

from urllib.parse import urlparse

from channels.auth import AuthMiddlewareStack
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.http.request import validate_host

from webapp.auth import bearer_from_header, user_for_token


def origin_allowed(origin: str | None) -> bool:
    if not origin:
        return False
    parsed = urlparse(origin)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return False
    if origin.rstrip("/") in {o.rstrip("/") for o in settings.CSRF_TRUSTED_ORIGINS}:
        return True
    return validate_host(parsed.hostname, settings.ALLOWED_HOSTS)


class BearerOrSessionMiddleware:
    """Sets scope['user'] (bearer token first, then session) and scope['auth'] = {'via', 'origin_ok'}."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        raw = bearer_from_header(headers.get("authorization"))
        scope = dict(scope)
        if raw:
            user = await database_sync_to_async(user_for_token)(raw)
            scope["user"] = user or AnonymousUser()
            # scripts need no Origin; a browser page that sends one must still be ours
            scope["auth"] = {"via": "bearer" if user else None, "origin_ok": origin is None or origin_allowed(origin)}
            return await self.inner(scope, receive, send)
        scope["auth"] = {"via": "session", "origin_ok": origin_allowed(origin)}
        return await self.inner(scope, receive, send)


def WebSocketAuthStack(inner):
    return AuthMiddlewareStack(BearerOrSessionMiddleware(inner))
