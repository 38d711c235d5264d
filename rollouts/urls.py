from django.urls import path

from rollouts import api_asking, api_episodes, api_privacy

urlpatterns = [
    path("episodes/", api_episodes.EpisodeListApi.as_view(), name="episode-list"),
    path("projects/<int:project_id>/episodes/", api_episodes.EpisodesStartApi.as_view(), name="episodes-start"),
    path("episodes/<int:episode_id>/", api_episodes.EpisodeDetailApi.as_view(), name="episode-detail"),
    path("episodes/<int:episode_id>/neighbours", api_episodes.EpisodeNeighboursApi.as_view(), name="episode-neighbours"),
    path("episodes/<int:episode_id>/resume", api_episodes.EpisodeResumeApi.as_view(), name="episode-resume"),
    path("episodes/<int:episode_id>/branch", api_episodes.EpisodeBranchApi.as_view(), name="episode-branch"),
    path("episodes/<int:episode_id>/steps/<int:index>/screenshot", api_episodes.StepScreenshotApi.as_view(), name="step-screenshot"),
    path("episodes/<int:episode_id>/steps/<int:index>/original", api_privacy.StepOriginalApi.as_view(),
         name="step-original"),
    path("episodes/<int:episode_id>/proposals/<int:index>/screenshot", api_episodes.ProposalScreenshotApi.as_view(),
         name="proposal-screenshot"),
    path("projects/<int:project_id>/asking", api_asking.AskSettingsApi.as_view(), name="ask-settings"),
    path("projects/<int:project_id>/asking/calibration", api_asking.AskCalibrationApi.as_view(), name="ask-calibration"),
    path("projects/<int:project_id>/asks", api_asking.AsksWaitingApi.as_view(), name="asks-waiting"),
]
