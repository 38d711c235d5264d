from django.urls import path

from annotation import api, api_judge, api_polish, api_redaction

urlpatterns = [
    path("episodes/<int:episode_id>/audio/", api.ClipCreateApi.as_view(), name="clip-create"),
    path("episodes/<int:episode_id>/transcript", api.TranscriptApi.as_view(), name="transcript"),
    path("audio/<int:clip_id>/", api.ClipDetailApi.as_view(), name="clip-detail"),
    path("audio/<int:clip_id>/chunks/<int:index>", api.ChunkUploadApi.as_view(), name="chunk-upload"),
    path("audio/<int:clip_id>/finish", api.ClipFinishApi.as_view(), name="clip-finish"),
    path("audio/<int:clip_id>/file", api.ClipAudioApi.as_view(), name="clip-file"),
    path("episodes/<int:episode_id>/reviews/", api.ReviewListApi.as_view(), name="review-list"),
    path("episodes/<int:episode_id>/review", api.ReviewSubmitApi.as_view(), name="review-submit"),
    path("projects/<int:project_id>/agreement", api.AgreementApi.as_view(), name="agreement"),
    path("projects/<int:project_id>/review-queues/", api.QueueListApi.as_view(), name="queue-list"),
    path("review-queues/<int:queue_id>/", api.QueueDetailApi.as_view(), name="queue-detail"),
    path("review-queues/<int:queue_id>/next", api.QueueNextApi.as_view(), name="queue-next"),
    path("queue-items/<int:item_id>/", api.QueueItemApi.as_view(), name="queue-item"),
    path("queue-items/<int:item_id>/release", api.QueueReleaseApi.as_view(), name="queue-release"),
    path("queue-items/<int:item_id>/adjudicate", api.QueueAdjudicateApi.as_view(), name="queue-adjudicate"),
    path("projects/<int:project_id>/dashboard", api.DashboardApi.as_view(), name="dashboard"),
    path("projects/<int:project_id>/redaction", api_redaction.RedactionApi.as_view(), name="redaction"),
    path("projects/<int:project_id>/redaction/marks", api_redaction.RedactionMarkApi.as_view(), name="redaction-marks"),
]

urlpatterns += [
    path("projects/<int:project_id>/judge", api_judge.JudgeSettingsApi.as_view(), name="judge-settings"),
    path("projects/<int:project_id>/judge/calibration", api_judge.JudgeCalibrationApi.as_view(), name="judge-calibration"),
    path("projects/<int:project_id>/judgements/", api_judge.JudgeRequestApi.as_view(), name="judge-request"),
    path("episodes/<int:episode_id>/judgements/", api_judge.EpisodeJudgementsApi.as_view(), name="episode-judgements"),
    path("projects/<int:project_id>/polish", api_polish.PolishSettingsApi.as_view(), name="polish-settings"),
    path("episodes/<int:episode_id>/polish", api_polish.EpisodePolishApi.as_view(), name="episode-polish"),
    path("episodes/<int:episode_id>/steps/<int:index>/polish", api_polish.StepPolishApi.as_view(), name="step-polish"),
]
