"""Reads. Every read a person can trigger is filtered by project membership; staff see everything."""
from __future__ import annotations

from django.db.models import QuerySet

from core.errors import ApplicationError
from projects.models import Membership, Project, Role, TaskSpec

ROLE_RANK = {Role.ANNOTATOR: 1, Role.MANAGER: 2, Role.ADMIN: 3}


def project_role(*, user, project: Project | int) -> str | None:
    """The user's role in the project ('admin' for staff), or None when they are not a member."""
    if not user or not user.is_authenticated:
        return None
    if user.is_staff:
        return Role.ADMIN
    project_id = project.pk if isinstance(project, Project) else project
    return (
        Membership.objects.filter(project_id=project_id, user=user).values_list("role", flat=True).first()
    )


def role_at_least(role: str | None, minimum: str) -> bool:
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[minimum]


def projects_for_user(*, user) -> QuerySet[Project]:
    if user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user)


def project_for_user(*, user, project_id: int, minimum: str = Role.ANNOTATOR) -> tuple[Project, str]:
    """The project and the user's role; 404 when not a member (existence is not revealed), 403 when the role is too low."""
    role = project_role(user=user, project=project_id)
    project = Project.objects.filter(pk=project_id).first() if role else None
    if project is None:
        raise ApplicationError("No such project, or you are not a member of it.", status=404)
    if not role_at_least(role, minimum):
        raise ApplicationError(f"This needs the {minimum} role in {project.name}; you are {role}.", status=403)
    return project, role


def tasks_for_project(*, project: Project) -> QuerySet[TaskSpec]:
    return project.tasks.all()


def members_for_project(*, project: Project) -> QuerySet[Membership]:
    return project.memberships.select_related("user")




