"""The web app's URLs of the environment service (webapp/urls.py includes them under /api/v1/)."""
from django.urls import path

from envservice import web_api

urlpatterns = [
    path("envservice/hosts", web_api.EnvServiceHostsApi.as_view(), name="envservice-hosts"),
]
