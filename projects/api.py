"""REST for projects, members, tasks and episodes, and the pieces every API module shares (pagination, role
filtering, checkpoint references). Views are thin: selectors read, the topic modules (projects, episodes) write.
The other topics have their own modules: api_runs, api_datasets, api_judge, api_cycles, api_polish, api_tasks,
api_branches."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api import LimitedCharField, StrictSerializer, UserRef, keyset_page
from core.errors import ApplicationError
from core.paths import paths_hidden
from projects import selectors, services
from projects.models import Membership, Role


class Page(CursorPagination):
    """Keyset pagination: stable and fast however deep the list."""

    page_size = 50
    max_page_size = 200
    page_size_query_param = "page_size"
    ordering = "-id"


def for_role(data, role: str | None):
    """What a member of ``role`` reads of checkpoints, runs and cycles: server paths are for admins only."""
    return data if role == Role.ADMIN else paths_hidden(data)


def paginate(view: APIView, queryset, serializer_class, ordering: str = "-id", **context):
    page = Page()
    page.ordering = ordering if ordering.lstrip("-") == "id" else (ordering, "-id")
    items = page.paginate_queryset(queryset, view.request, view=view)
    data = serializer_class(items, many=True, context=context).data
    return Response({"results": data, "next": page.get_next_link(), "previous": page.get_previous_link()})


# --- projects ----------------------------------------------------------------------------------
class ProjectOutput(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    created_at = serializers.DateTimeField()
    role = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ChoiceField(choices=Role.choices, allow_null=True))
    def get_role(self, project) -> str | None:
        user = self.context["user"]
        if user.is_staff:
            return Role.ADMIN
        return self.context.get("roles", {}).get(project.pk) or selectors.project_role(user=user, project=project)


class ProjectUpdateInput(StrictSerializer):
    name = LimitedCharField("project_name", required=False)
    description = serializers.CharField(required=False, allow_blank=True)


class ProjectListApi(APIView):
    @extend_schema(operation_id="projects_list", responses={200: keyset_page(ProjectOutput, "ProjectPage")})
    def get(self, request):
        projects = selectors.projects_for_user(user=request.user)
        roles = dict(Membership.objects.filter(user=request.user).values_list("project_id", "role"))
        return paginate(self, projects, ProjectOutput, ordering="id", user=request.user, roles=roles)


class ProjectDetailApi(APIView):
    @extend_schema(responses={200: ProjectOutput})
    def get(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id)
        return Response(ProjectOutput(project, context={"user": request.user, "roles": {project.pk: role}}).data)

    @extend_schema(request=ProjectUpdateInput, responses={200: ProjectOutput})
    def patch(self, request, project_id: int):
        project, role = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.MANAGER)
        data = ProjectUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        project = services.project_update(project=project, actor=request.user, **data.validated_data)
        return Response(ProjectOutput(project, context={"user": request.user, "roles": {project.pk: role}}).data)


# --- members -----------------------------------------------------------------------------------
class MemberOutput(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.SerializerMethodField()
    role = serializers.ChoiceField(choices=Role.choices)

    @extend_schema_field(UserRef)
    def get_user(self, membership) -> dict:
        return {"id": membership.user_id, "username": membership.user.username}


class MemberCreateInput(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


class MemberUpdateInput(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)


class MemberListApi(APIView):
    @extend_schema(operation_id="projects_members_list", responses={200: keyset_page(MemberOutput, "MemberPage")})
    def get(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id)
        return paginate(self, selectors.members_for_project(project=project), MemberOutput, ordering="id")

    @extend_schema(request=MemberCreateInput, responses={201: MemberOutput})
    def post(self, request, project_id: int):
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ADMIN)
        data = MemberCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_set(project=project, actor=request.user, **data.validated_data)
        return Response(MemberOutput(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(APIView):
    def _membership(self, request, project_id: int, member_id: int) -> Membership:
        project, _ = selectors.project_for_user(user=request.user, project_id=project_id, minimum=Role.ADMIN)
        membership = project.memberships.select_related("user").filter(pk=member_id).first()
        if membership is None:
            raise ApplicationError("No such member in this project.", status=404)
        return membership

    @extend_schema(request=MemberUpdateInput, responses={200: MemberOutput})
    def patch(self, request, project_id: int, member_id: int):
        membership = self._membership(request, project_id, member_id)
        data = MemberUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        membership = services.membership_set(project=membership.project, actor=request.user,
                                             username=membership.user.username, role=data.validated_data["role"])
        return Response(MemberOutput(membership).data)

    @extend_schema(responses={204: None})
    def delete(self, request, project_id: int, member_id: int):
        services.membership_remove(membership=self._membership(request, project_id, member_id), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


