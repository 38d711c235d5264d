"""Serves the built React app (frontend/dist) for every non-API path."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import ensure_csrf_cookie

_MISSING = """<!doctype html><title>Loupe</title><body>
<h1>Loupe</h1><p>The frontend is not built yet. Run <code>make frontend</code> (or <code>make run</code>),
then reload. The API is at <a href="/api/v1/openapi.json">/api/v1/</a>.</p></body>"""


@ensure_csrf_cookie
def index(request, path: str = ""):
    index_file = settings.FRONTEND_DIST / "index.html"
    if not index_file.exists():
        return HttpResponse(_MISSING, status=503)
    response = HttpResponse(index_file.read_bytes(), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    return response
