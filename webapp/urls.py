from django.contrib import admin
from django.core.exceptions import DisallowedHost
from django.http import JsonResponse
from django.views import defaults
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularJSONAPIView

from webapp import api, spa


@csrf_exempt  # writes nothing; without it a POST to a wrong URL got the CSRF middleware's HTML 403, not this JSON 404
def api_not_found(request, rest=""):
    return JsonResponse({"detail": f"There is no API endpoint at /api/v1/{rest}; see /api/v1/openapi.json."}, status=404)


def bad_request(request, exception):
    """Django's 400 (a SuspiciousOperation before any view ran, such as a Host header outside LOUPE_ALLOWED_HOSTS)
    was an HTML page for API clients too; the API's errors are JSON with a `detail` message."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception)
    if isinstance(exception, DisallowedHost):
        detail = "This server does not answer to the Host this request names; check the URL."
    else:
        detail = "The request could not be read; check its headers and body."
    return JsonResponse({"detail": detail}, status=400)


handler400 = bad_request

api_v1 = [
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("health", api.HealthApi.as_view(), name="health"),
    path("auth/session", api.SessionApi.as_view(), name="auth-session"),
    path("auth/token", api.TokenApi.as_view(), name="auth-token"),
    path("auth/me", api.MeApi.as_view(), name="auth-me"),
    path("", include("flywheel.urls")),
    path("", include("annotation.urls")),
    re_path(r"^(?P<rest>(?s:.*))$", api_not_found),  # (?s): a path with an encoded newline is still the API's 404
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
    re_path(r"^(?!api/|admin/|static/|ws/)(?P<path>.*)$", spa.index, name="spa"),
]
