"""One application error type, and the API's JSON error shape: {"detail": "...", "errors": {...}}."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response


class ApplicationError(Exception):
    """Raised by services. `status` is the HTTP status the API answers with."""

    def __init__(self, message: str, *, status: int = 400, errors: dict | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.errors = errors or {}


def _flatten(detail) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            text = _flatten(value)
            return text if key in ("detail", "non_field_errors") else f"{key}: {text}"
        return "Invalid input."
    if isinstance(detail, list):
        return _flatten(detail[0]) if detail else "Invalid input."
    return str(detail)


def api_exception_handler(exc, context):
    from rest_framework.views import exception_handler  # late: rest_framework.views imports our auth classes

    if isinstance(exc, ApplicationError):
        body = {"detail": exc.message}
        if exc.errors:
            body["errors"] = exc.errors
        return Response(body, status=exc.status)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, Http404):
        return Response({"detail": "Not found, or you are not a member of its project."}, status=404)
    if isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = {"detail": _flatten(exc.detail), "errors": errors}
    elif isinstance(exc, exceptions.ParseError):
        response.data = {"detail": f"The request body is not valid JSON: {exc.detail}"}
    elif isinstance(exc, exceptions.NotAuthenticated):
        response.status_code = status.HTTP_401_UNAUTHORIZED
        response.data = {"detail": "Log in, or send an Authorization: Bearer <token> header."}
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"])}
    return response


class HealthProbeFilter:
    """Drops django.request's "Service Unavailable: /api/v1/health" line: a degraded health answer is the
    probe's content, not a server error (HealthApi logs when the answer changes)."""

    def filter(self, record) -> bool:
        request = getattr(record, "request", None)
        path = getattr(request, "path", "")
        return not (getattr(record, "status_code", None) == 503 and path.rstrip("/").endswith("/api/v1/health"))
