"""Cycle settings refuse what the policy server cannot load (issue 36): vLLM loads LoRA adapters at run time
(/v1/load_lora_adapter reads a PEFT adapter dir), so a cycle whose export is ``full`` on the openai backend would fail
at its deploy, after training. The refusal comes when the setting is made, with the reason and what to do instead."""
import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from projects.models import Project, Role
from tests.factories import make_member, make_project, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def manager_api():
    project = make_project()
    manager = make_user("manager")
    make_member(project, manager, Role.MANAGER)
    api = APIClient()
    api.force_authenticate(manager)
    return project, api


def patch(api: APIClient, project: Project, changes: dict):
    return api.patch(f"/api/v1/projects/{project.pk}/cycle-settings", changes, format="json")


@override_settings(LOUPE_OPENAI_SERVER="vllm")
def test_full_export_to_vllm_is_refused_with_the_reason_and_changes_nothing(manager_api):
    project, api = manager_api
    response = patch(api, project, {"backend": "openai", "export": "full"})
    assert response.status_code == 400, response.content
    message = response.json()["errors"]["export"][0]
    assert "vLLM" in message and "LoRA adapters" in message and "trainer serve" in message
    project.refresh_from_db()
    assert "cycle" not in (project.settings or {})
    # set one at a time, the second change is refused too: the check reads the merged settings
    assert patch(api, project, {"export": "full"}).status_code == 200  # the local backend ignores export
    assert patch(api, project, {"backend": "openai"}).status_code == 400


@override_settings(LOUPE_OPENAI_SERVER="vllm", LOUPE_POLICY_BACKEND="openai")
def test_full_export_is_refused_when_the_backend_comes_from_the_deployment_default(manager_api):
    project, api = manager_api
    response = patch(api, project, {"export": "full"})
    assert response.status_code == 400 and "export" in response.json()["errors"], response.content


@override_settings(LOUPE_OPENAI_SERVER="loupe")
def test_full_export_is_taken_when_the_server_is_trainer_serve(manager_api):
    project, api = manager_api
    response = patch(api, project, {"backend": "openai", "export": "full"})
    assert response.status_code == 200, response.content
    assert (response.json()["backend"], response.json()["export"]) == ("openai", "full")
