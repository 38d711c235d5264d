"""HTTP middleware: a database outage is a 503 with a retry hint, not a 500."""
from __future__ import annotations

from django.db import OperationalError, InterfaceError
from django.http import JsonResponse


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            response = JsonResponse(
                {"detail": "The database is unavailable right now; retry in a few seconds."}, status=503
            )
            response["Retry-After"] = "5"
            return response
        return None
