from django.urls import path

from projects import api, api_taskspecs

urlpatterns = [
    path("projects/", api.ProjectListApi.as_view(), name="project-list"),
    path("projects/<int:project_id>/", api.ProjectDetailApi.as_view(), name="project-detail"),
    path("projects/<int:project_id>/members/", api.MemberListApi.as_view(), name="member-list"),
    path("projects/<int:project_id>/members/<int:member_id>/", api.MemberDetailApi.as_view(), name="member-detail"),
    path("projects/<int:project_id>/tasks/", api_taskspecs.TaskListApi.as_view(), name="task-list"),
    path("projects/<int:project_id>/tasks/<int:task_id>/", api_taskspecs.TaskDetailApi.as_view(), name="task-detail"),
    path("projects/<int:project_id>/tasks/import", api_taskspecs.TaskImportApi.as_view(), name="task-import"),
    path("projects/<int:project_id>/tasks/export", api_taskspecs.TaskExportApi.as_view(), name="task-export"),
    path("projects/<int:project_id>/tasks/files", api_taskspecs.TaskFilesApi.as_view(), name="task-files"),
    path("projects/<int:project_id>/tasks/files/<int:file_id>", api_taskspecs.TaskFileApi.as_view(), name="task-file"),
    path("tasks/catalogue", api_taskspecs.TaskCatalogueApi.as_view(), name="task-catalogue"),
]
