from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularJSONAPIView

from webapp import api, spa


def api_not_found(request, rest=""):
    return JsonResponse({"detail": f"There is no API endpoint at /api/v1/{rest}; see /api/v1/openapi.json."}, status=404)


api_v1 = [
    path("openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("health", api.HealthApi.as_view(), name="health"),
    path("auth/session", api.SessionApi.as_view(), name="auth-session"),
    path("auth/token", api.TokenApi.as_view(), name="auth-token"),
    path("auth/me", api.MeApi.as_view(), name="auth-me"),
    path("", include("flywheel.urls")),
    path("", include("annotation.urls")),
    re_path(r"^(?P<rest>.*)$", api_not_found),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("admin/", admin.site.urls),
    re_path(r"^(?!api/|admin/|static/|ws/)(?P<path>.*)$", spa.index, name="spa"),
]
