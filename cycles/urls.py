from django.urls import path

from cycles import api

urlpatterns = [
    path("projects/<int:project_id>/cycles/", api.CycleListApi.as_view(), name="cycle-list"),
    path("projects/<int:project_id>/cycle-settings", api.CycleSettingsApi.as_view(), name="cycle-settings"),
    path("cycles/<int:cycle_id>/", api.CycleDetailApi.as_view(), name="cycle-detail"),
    path("cycles/<int:cycle_id>/approve", api.CycleApproveApi.as_view(), name="cycle-approve"),
    path("cycles/<int:cycle_id>/reject", api.CycleRejectApi.as_view(), name="cycle-reject"),
    path("projects/<int:project_id>/deployments/<int:deployment_id>/rollback",
         api.DeploymentRollbackApi.as_view(), name="deployment-rollback"),
]
