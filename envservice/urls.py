"""The service process's URLs (envservice/server.py serves only these)."""
from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView
from rest_framework.permissions import AllowAny

from envservice import api

urlpatterns = [
    path("v1/leases", api.LeaseCreateApi.as_view()),
    path("v1/leases/<str:lease_id>", api.LeaseApi.as_view()),
    path("v1/leases/<str:lease_id>/reset", api.LeaseResetApi.as_view()),
    path("v1/leases/<str:lease_id>/step", api.LeaseStepApi.as_view()),
    path("v1/leases/<str:lease_id>/end", api.LeaseEndApi.as_view()),
    path("v1/status", api.StatusApi.as_view()),
    path("openapi.json", SpectacularJSONAPIView.as_view(permission_classes=[AllowAny],
        urlconf="envservice.urls", custom_settings={"TITLE": "Loupe environment service", "VERSION": "1.0.0",
                                                    "DESCRIPTION": "Lease Loupe's envs over HTTP, reset, step, "
                                                                   "release; every episode is an Episode in Loupe."}),
         name="envservice-schema"),
]


def _json_error(status: int, detail: str):
    def view(request, exception=None):
        from django.http import JsonResponse

        return JsonResponse({"detail": detail}, status=status)
    return view


handler404 = _json_error(404, "No such path on the environment service; its schema is at /openapi.json.")
handler500 = _json_error(500, "The environment service failed on this request (its log says why); try again, or "
                              "lease another env.")
