"""Middleware: a database outage is a 503 with a retry hint (HTTP) or a 4503 close (WebSocket), not a 500 or a
traceback; under /api/ every error, even one raised outside DRF's exception handler, is JSON with a `detail`; and
every response carries a Content-Security-Policy."""
from __future__ import annotations

import json
import logging

from django.core.exceptions import DisallowedHost, RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse

log = logging.getLogger("django.request")

RETRY_AFTER_SECONDS = 5


# What a Loupe page may load, and from where: its own origin only. The built frontend has no inline script
# (frontend/dist/index.html loads one module file) and no inline style (React's style props are set through
# the CSSOM, which style-src does not govern), and neither has the Django admin, so neither needs
# 'unsafe-inline'. Screenshots and the favicon may be data: or blob: URLs, recorded audio blob: ones; the
# live session's WebSocket is added per request (connect-src 'self' covers ws: only in CSP Level 3 browsers).
CONTENT_SECURITY_POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data: blob:",
    "media-src": "'self' blob:",
    "connect-src": "'self'",
    "font-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}


def content_security_policy(host: str | None) -> str:
    """The policy as a header value; `host` (the request's, validated) adds its WebSocket origins."""
    policy = dict(CONTENT_SECURITY_POLICY)
    if host:
        policy["connect-src"] += f" ws://{host} wss://{host}"
    return "; ".join(f"{name} {sources}" for name, sources in policy.items())


class ContentSecurityPolicyMiddleware:
    """Sets Content-Security-Policy on every response (pages, the SPA's files, the API, the admin) that has
    none. A small middleware rather than django-csp: one fixed policy, no new dependency."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            try:
                host = request.get_host()
            except DisallowedHost:
                host = None  # the 400 for a foreign Host header gets the policy without WebSocket origins
            response["Content-Security-Policy"] = content_security_policy(host)
        return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            log.warning("database unavailable for %s %s: %s", request.method, request.path, exception)
            response = JsonResponse(
                {"detail": "The database is unavailable right now; retry in a few seconds."}, status=503
            )
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
            return response
        return None


def api_bad_request(request, exception) -> JsonResponse:
    """An API request refused as malformed, as JSON: from a view (ApiJsonErrorMiddleware) or from before any view
    ran (webapp/urls.py handler400, such as a Host header outside LOUPE_ALLOWED_HOSTS)."""
    log.warning("suspicious request %s %s: %s", request.method, request.path, exception)
    if isinstance(exception, DisallowedHost):
        return JsonResponse({"detail": "This server does not answer to the Host this request names; check the URL."},
                            status=400)
    return JsonResponse({"detail": "The request was refused as malformed."}, status=400)


class ApiJsonErrorMiddleware:
    """Exceptions DRF does not answer (a body over DATA_UPLOAD_MAX_MEMORY_SIZE, too many form fields, any bug)
    would get Django's HTML error pages; an API client gets JSON instead. Listed before
    DatabaseUnavailableMiddleware in MIDDLEWARE (process_exception runs bottom-up), so it sees an exception
    only when that one passed it on."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not request.path.startswith("/api/"):
            return None
        if isinstance(exception, RequestDataTooBig):
            from django.conf import settings

            return JsonResponse({"detail": f"The request body is over the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} "
                                           "bytes this API accepts."}, status=413)
        if isinstance(exception, TooManyFieldsSent):
            return JsonResponse({"detail": "The request has too many fields."}, status=400)
        if isinstance(exception, SuspiciousOperation):
            return api_bad_request(request, exception)
        log.error("internal error on %s %s", request.method, request.path, exc_info=exception)
        return JsonResponse({"detail": "Something went wrong on the server; it has been logged. Try again, "
                                       "and report it if it persists."}, status=500)


# 503's twin for sockets: the database is unavailable; reconnect in a few seconds.
CLOSE_UNAVAILABLE = 4503


class WebSocketDatabaseUnavailable:
    """ASGI middleware, outermost on WebSockets: when authentication or the consumer hits a database outage,
    the client gets an `error` message and the close code 4503 (and reconnects later, with after=<seq>),
    instead of a failed handshake and a traceback in the log."""

    def __init__(self, inner):
        self.inner = inner

    async def __call__(self, scope, receive, send):
        if scope["type"] != "websocket":
            return await self.inner(scope, receive, send)
        state = {"accepted": False, "closed": False}

        async def tracking_send(message):
            state["accepted"] |= message["type"] == "websocket.accept"
            state["closed"] |= message["type"] == "websocket.close"
            await send(message)

        try:
            return await self.inner(scope, receive, tracking_send)
        except (OperationalError, InterfaceError) as exc:
            log.warning("database unavailable for socket %s: %s", scope.get("path"), exc)
            if state["closed"]:
                return None
            if not state["accepted"]:
                await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": json.dumps({"type": "error", "id": None, "data": {
                "message": "The database is unavailable right now; reconnect in a few seconds."}})})
            await send({"type": "websocket.close", "code": CLOSE_UNAVAILABLE})
            return None
