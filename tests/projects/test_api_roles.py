"""What each role may and may not see or change, through the real API."""
import pytest
from rest_framework.test import APIClient

from core.errors import ApplicationError
from core.limits import LIMITS
from projects import services
from projects.models import Membership, Project, Role

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def project_names(user) -> set[str]:
    response = client_for(user).get("/api/v1/projects/")
    assert response.status_code == 200
    return {p["name"] for p in response.json()["results"]}


def test_each_user_lists_only_their_projects(demo):
    assert project_names(demo["annotator"]) == {"Alpha"}
    assert project_names(demo["manager"]) == {"Alpha"}
    assert project_names(demo["outsider"]) == {"Beta"}
    assert project_names(demo["staff"]) == {"Alpha", "Beta"}


def test_project_list_reports_the_users_role(demo):
    rows = client_for(demo["manager"]).get("/api/v1/projects/").json()["results"]
    assert [(r["name"], r["role"]) for r in rows] == [("Alpha", "manager")]


def test_another_projects_data_is_404(demo):
    pid = demo["project"].pk
    outsider = client_for(demo["outsider"])
    for path in (f"/api/v1/projects/{pid}/", f"/api/v1/projects/{pid}/tasks/", f"/api/v1/projects/{pid}/members/"):
        response = outsider.get(path)
        assert response.status_code == 404, path
        assert "not a member" in response.json()["detail"]


def test_annotator_reads_tasks_but_cannot_edit_the_project(demo):
    pid = demo["project"].pk
    annotator = client_for(demo["annotator"])
    tasks = annotator.get(f"/api/v1/projects/{pid}/tasks/").json()["results"]
    assert [t["task_name"] for t in tasks] == ["click-button"]
    response = annotator.patch(f"/api/v1/projects/{pid}/", {"name": "Mine"}, format="json")
    assert response.status_code == 403
    assert "manager" in response.json()["detail"]


def test_manager_edits_the_project_and_adds_tasks(demo):
    pid = demo["project"].pk
    manager = client_for(demo["manager"])
    assert manager.patch(f"/api/v1/projects/{pid}/", {"description": "new"}, format="json").json()["description"] == "new"
    created = manager.post(f"/api/v1/projects/{pid}/tasks/", {"task_name": "click-link", "split": "eval"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["split"] == "eval"


def test_a_project_name_is_kept_whole_up_to_its_limit_and_refused_past_it(demo):
    pid, name = demo["project"].pk, "p" * LIMITS["project_name"]
    manager = client_for(demo["manager"])
    over = manager.patch(f"/api/v1/projects/{pid}/", {"name": name + "!"}, format="json")
    assert over.status_code == 400
    assert f"The project name is {len(name) + 1:,} characters long" in over.json()["errors"]["name"][0]
    assert Project.objects.get(pk=pid).name == "Alpha"
    with pytest.raises(ApplicationError):  # the services refuse too: no path cuts
        services.project_update(project=demo["project"], actor=demo["manager"], name=name + "!")
    with pytest.raises(ApplicationError):
        services.project_create(name=name + "!")
    assert manager.patch(f"/api/v1/projects/{pid}/", {"name": name}, format="json").json()["name"] == name


def test_unknown_task_name_is_refused_with_the_reason(demo):
    response = client_for(demo["manager"]).post(f"/api/v1/projects/{demo['project'].pk}/tasks/",
                                                {"task_name": "fly-to-moon"}, format="json")
    assert response.status_code == 400
    assert "not a registered miniwob task" in response.json()["detail"]


def test_only_admins_manage_members(demo):
    pid = demo["project"].pk
    body = {"username": "out", "role": "annotator"}
    assert client_for(demo["manager"]).post(f"/api/v1/projects/{pid}/members/", body, format="json").status_code == 403
    response = client_for(demo["admin"]).post(f"/api/v1/projects/{pid}/members/", body, format="json")
    assert response.status_code == 201
    assert Membership.objects.get(project_id=pid, user=demo["outsider"]).role == Role.ANNOTATOR
    assert project_names(demo["outsider"]) == {"Alpha", "Beta"}


def test_last_admin_cannot_be_removed(demo):
    pid = demo["project"].pk
    membership = Membership.objects.get(project_id=pid, user=demo["admin"])
    response = client_for(demo["admin"]).delete(f"/api/v1/projects/{pid}/members/{membership.pk}/")
    assert response.status_code == 409
    assert Membership.objects.filter(pk=membership.pk).exists()


def test_a_failed_service_call_writes_nothing(demo):
    pid = demo["project"].pk
    before = Membership.objects.count()
    response = client_for(demo["admin"]).post(f"/api/v1/projects/{pid}/members/", {"username": "ghost", "role": "admin"},
                                              format="json")
    assert response.status_code == 404
    assert Membership.objects.count() == before
