"""The one view of a project's settings sections (projects/project_settings.py)."""
from __future__ import annotations

from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import ApplicationError
from projects import selectors
from projects.models import Project, Role
from projects.project_settings import Section, section_of, section_set


class SettingsSectionApi(APIView):
    """GET a project's settings section (members of ``read_role``), PATCH any of its fields (managers). A subclass
    names its ``section`` and its schema (``extend_schema_view``); ``input_serializer`` checks the body's shape
    first where the section has one, else the body is any JSON object the section's clean judges; ``output`` is what
    both answer."""
    section: Section
    read_role = Role.MANAGER  # the least role that reads it
    input_serializer = None

    def output(self, project: Project) -> dict:
        return section_of(self.section, project)

    def changes(self, request) -> dict:
        if self.input_serializer is None:
            if not isinstance(request.data, dict):
                raise ApplicationError("Send the settings to change as a JSON object.")
            return dict(request.data)
        data = self.input_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        return dict(data.validated_data)

    def set(self, project: Project, actor, changes: dict) -> None:
        section_set(section=self.section, project=project, actor=actor, changes=changes)

    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=self.read_role)
        return Response(self.output(project))

    def patch(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        self.set(project, request.user, self.changes(request))
        project.refresh_from_db()
        return Response(self.output(project))
