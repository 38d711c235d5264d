from django.urls import path

from training import api

urlpatterns = [
    path("projects/<int:project_id>/checkpoints/", api.CheckpointListApi.as_view(), name="checkpoint-list"),
    path("projects/<int:project_id>/deployments/", api.DeploymentListApi.as_view(), name="deployment-list"),
    path("projects/<int:project_id>/runs/", api.RunListApi.as_view(), name="run-list"),
]
