"""Project settings by section (projects/project_settings.py) through their one view: a bad change is refused naming its
field and changes nothing, a good one keeps the other sections, and each is the managers'."""
import pytest
from rest_framework.test import APIClient

from core.models import AuditEntry
from projects.models import Project, Role
from tests.factories import make_member, make_project, make_user

pytestmark = pytest.mark.django_db

# endpoint -> (a bad change and the field it names, a good change and what reads back)
SECTIONS = {
    "routing": ({"reward_threshold": 2}, "reward_threshold", {"rule": "review"}, ("rule", "review")),
    "judge": ({"samples": 0}, "samples", {"samples": 3}, ("samples", 3)),
    "polish": ({"backend": "nope"}, "backend", {"enabled": True}, ("enabled", True)),
    "cycle-settings": ({"margin": 5}, "margin", {"eval_seeds": 4}, ("eval_seeds", 4)),
}


@pytest.fixture
def project():
    project = make_project()
    for role in Role.values:
        make_member(project, make_user(role), role)
    return project


def client(username: str) -> APIClient:
    from django.contrib.auth import get_user_model

    api = APIClient()
    api.force_authenticate(get_user_model().objects.get(username=username))
    return api


@pytest.mark.parametrize("endpoint", list(SECTIONS))
def test_a_bad_change_is_refused_naming_its_field_and_changes_nothing(project, endpoint):
    bad, field, _, _ = SECTIONS[endpoint]
    before = dict(project.settings or {})
    response = client("manager").patch(f"/api/v1/projects/{project.pk}/{endpoint}", bad, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json().get("errors", {}) or field in response.json()["detail"]
    project.refresh_from_db()
    assert (project.settings or {}) == before
    assert not AuditEntry.objects.filter(project_id=project.pk).exists()


def test_each_section_is_kept_when_another_is_set(project):
    for endpoint, (_, _, good, (key, value)) in SECTIONS.items():
        response = client("manager").patch(f"/api/v1/projects/{project.pk}/{endpoint}", good, format="json")
        assert response.status_code == 200, response.content
        assert response.json()[key] == value
    project = Project.objects.get(pk=project.pk)
    assert set(project.settings) >= {"routing", "judge", "polish", "cycle"}
    for endpoint, (_, _, _, (key, value)) in SECTIONS.items():  # each still reads what was set, after all four
        assert client("manager").get(f"/api/v1/projects/{project.pk}/{endpoint}").json()[key] == value
    assert AuditEntry.objects.filter(project_id=project.pk).count() == len(SECTIONS)


@pytest.mark.parametrize("endpoint", list(SECTIONS))
def test_an_annotator_changes_no_section(project, endpoint):
    _, _, good, _ = SECTIONS[endpoint]
    response = client("annotator").patch(f"/api/v1/projects/{project.pk}/{endpoint}", good, format="json")
    assert response.status_code == 403
    project.refresh_from_db()
    assert not project.settings or endpoint.split("-")[0] not in project.settings
