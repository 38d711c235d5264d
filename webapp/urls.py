from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path, re_path
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularJSONAPIView

from webapp import api, spa
from webapp.middleware import api_bad_request


@csrf_exempt  # writes nothing; without it a POST to a wrong URL got the CSRF middleware's HTML 403, not this JSON 404
def api_not_found(request, rest=""):
    return JsonResponse({"detail": f"There is no API endpoint at /api/v1/{rest}; see /api/v1/openapi.json."}, status=404)


def bad_request(request, exception):
    """Django's 400 (a SuspiciousOperation before any view ran) was an HTML page for API clients too."""
    if not request.path.startswith("/api/"):
        return defaults.bad_request(request, exception)
    return api_bad_request(request, exception)


handler400 = bad_request

api_v1 = [
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("health", api.HealthApi.as_view(), name="health"),
    path("auth/session", api.SessionApi.as_view(), name="auth-session"),
    path("auth/token", api.TokenApi.as_view(), name="auth-token"),
    path("auth/me", api.MeApi.as_view(), name="auth-me"),
    path("", include("projects.urls")),
    path("", include("rollouts.urls")),
    path("", include("snapshots.urls")),
    path("", include("training.urls")),
    path("", include("cycles.urls")),
    path("", include("annotation.urls")),
    path("", include("envservice.web_urls")),
    re_path(r"^(?P<rest>(?s:.*))$", api_not_found),  # (?s): a path with an encoded newline is still the API's 404
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
    re_path(r"^(?!api/|admin/|static/|ws/)(?P<path>.*)$", spa.index, name="spa"),
]
