from django.urls import path

from snapshots import api, api_branches

urlpatterns = [
    path("episodes/<int:episode_id>/compare", api_branches.BranchCompareApi.as_view(), name="episode-compare"),
    path("projects/<int:project_id>/routing", api.RoutingApi.as_view(), name="routing"),
    path("projects/<int:project_id>/snapshots/", api.SnapshotListApi.as_view(), name="snapshot-list"),
    path("snapshots/<int:snapshot_id>/", api.SnapshotDetailApi.as_view(), name="snapshot-detail"),
    path("snapshots/<int:snapshot_id>/rows", api.SnapshotRowsApi.as_view(), name="snapshot-rows"),
    path("snapshots/<int:snapshot_id>/export", api.SnapshotExportApi.as_view(), name="snapshot-export"),
    path("snapshots/<int:snapshot_id>/export-unredacted", api.SnapshotExportUnredactedApi.as_view(),
         name="snapshot-export-unredacted"),
]
