from django.urls import path

from flywheel import (api, api_asking, api_branches, api_cycles, api_datasets, api_judge, api_polish, api_privacy,
                      api_runs, api_tasks)

urlpatterns = [
    path("projects/", api.ProjectListApi.as_view(), name="project-list"),
    path("projects/<int:project_id>/", api.ProjectDetailApi.as_view(), name="project-detail"),
    path("projects/<int:project_id>/members/", api.MemberListApi.as_view(), name="member-list"),
    path("projects/<int:project_id>/members/<int:member_id>/", api.MemberDetailApi.as_view(), name="member-detail"),
    path("projects/<int:project_id>/tasks/", api_tasks.TaskListApi.as_view(), name="task-list"),
    path("projects/<int:project_id>/tasks/<int:task_id>/", api_tasks.TaskDetailApi.as_view(), name="task-detail"),
    path("projects/<int:project_id>/tasks/import", api_tasks.TaskImportApi.as_view(), name="task-import"),
    path("projects/<int:project_id>/tasks/export", api_tasks.TaskExportApi.as_view(), name="task-export"),
    path("projects/<int:project_id>/tasks/files", api_tasks.TaskFilesApi.as_view(), name="task-files"),
    path("projects/<int:project_id>/tasks/files/<int:file_id>", api_tasks.TaskFileApi.as_view(), name="task-file"),
    path("tasks/catalogue", api_tasks.TaskCatalogueApi.as_view(), name="task-catalogue"),
]
urlpatterns += [
    path("episodes/", api.EpisodeListApi.as_view(), name="episode-list"),
    path("projects/<int:project_id>/episodes/", api.EpisodesStartApi.as_view(), name="episodes-start"),
    path("episodes/<int:episode_id>/", api.EpisodeDetailApi.as_view(), name="episode-detail"),
    path("episodes/<int:episode_id>/neighbours", api.EpisodeNeighboursApi.as_view(), name="episode-neighbours"),
    path("episodes/<int:episode_id>/resume", api.EpisodeResumeApi.as_view(), name="episode-resume"),
    path("episodes/<int:episode_id>/branch", api.EpisodeBranchApi.as_view(), name="episode-branch"),
    path("episodes/<int:episode_id>/compare", api_branches.BranchCompareApi.as_view(), name="episode-compare"),
    path("episodes/<int:episode_id>/steps/<int:index>/screenshot", api.StepScreenshotApi.as_view(), name="step-screenshot"),
    path("episodes/<int:episode_id>/steps/<int:index>/original", api_privacy.StepOriginalApi.as_view(),
         name="step-original"),
    path("episodes/<int:episode_id>/proposals/<int:index>/screenshot", api.ProposalScreenshotApi.as_view(),
         name="proposal-screenshot"),
    path("projects/<int:project_id>/checkpoints/", api_runs.CheckpointListApi.as_view(), name="checkpoint-list"),
    path("projects/<int:project_id>/deployments/", api_runs.DeploymentListApi.as_view(), name="deployment-list"),
    path("projects/<int:project_id>/runs/", api_runs.RunListApi.as_view(), name="run-list"),
]
urlpatterns += [
    path("projects/<int:project_id>/routing", api_datasets.RoutingApi.as_view(), name="routing"),
    path("projects/<int:project_id>/snapshots/", api_datasets.SnapshotListApi.as_view(), name="snapshot-list"),
    path("snapshots/<int:snapshot_id>/", api_datasets.SnapshotDetailApi.as_view(), name="snapshot-detail"),
    path("snapshots/<int:snapshot_id>/rows", api_datasets.SnapshotRowsApi.as_view(), name="snapshot-rows"),
    path("snapshots/<int:snapshot_id>/export", api_datasets.SnapshotExportApi.as_view(), name="snapshot-export"),
    path("snapshots/<int:snapshot_id>/export-unredacted", api_datasets.SnapshotExportUnredactedApi.as_view(),
         name="snapshot-export-unredacted"),
]

urlpatterns += [
    path("projects/<int:project_id>/judge", api_judge.JudgeSettingsApi.as_view(), name="judge-settings"),
    path("projects/<int:project_id>/judge/calibration", api_judge.JudgeCalibrationApi.as_view(), name="judge-calibration"),
    path("projects/<int:project_id>/judgements/", api_judge.JudgeRequestApi.as_view(), name="judge-request"),
    path("episodes/<int:episode_id>/judgements/", api_judge.EpisodeJudgementsApi.as_view(), name="episode-judgements"),
]

urlpatterns += [
    path("projects/<int:project_id>/cycles/", api_cycles.CycleListApi.as_view(), name="cycle-list"),
    path("projects/<int:project_id>/cycle-settings", api_cycles.CycleSettingsApi.as_view(), name="cycle-settings"),
    path("cycles/<int:cycle_id>/", api_cycles.CycleDetailApi.as_view(), name="cycle-detail"),
    path("cycles/<int:cycle_id>/approve", api_cycles.CycleApproveApi.as_view(), name="cycle-approve"),
    path("cycles/<int:cycle_id>/reject", api_cycles.CycleRejectApi.as_view(), name="cycle-reject"),
    path("projects/<int:project_id>/deployments/<int:deployment_id>/rollback",
         api_cycles.DeploymentRollbackApi.as_view(), name="deployment-rollback"),
]

urlpatterns += [
    path("projects/<int:project_id>/polish", api_polish.PolishSettingsApi.as_view(), name="polish-settings"),
    path("episodes/<int:episode_id>/polish", api_polish.EpisodePolishApi.as_view(), name="episode-polish"),
    path("episodes/<int:episode_id>/steps/<int:index>/polish", api_polish.StepPolishApi.as_view(), name="step-polish"),
]

urlpatterns += [
    path("projects/<int:project_id>/asking", api_asking.AskSettingsApi.as_view(), name="ask-settings"),
    path("projects/<int:project_id>/asking/calibration", api_asking.AskCalibrationApi.as_view(), name="ask-calibration"),
    path("projects/<int:project_id>/asks", api_asking.AsksWaitingApi.as_view(), name="asks-waiting"),
]
