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
    path("v1/status", api.StatusApi.as_view()),
    path("openapi.json", SpectacularJSONAPIView.as_view(permission_classes=[AllowAny],
        urlconf="envservice.urls", custom_settings={"TITLE": "Loupe environment service", "VERSION": "1.0.0",
                                                    "DESCRIPTION": "Lease Loupe's envs over HTTP, reset, step, "
                                                                   "release; every episode is an Episode in Loupe."}),
         name="envservice-schema"),
]
