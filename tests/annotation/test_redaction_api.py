"""A project's redaction policy through the real API (issue 40): managers see what it finds in recent episodes, by
kind with examples, and change it; switching it off needs an admin and a reason, and every change is audited
without the word list."""
import pytest
from rest_framework.test import APIClient

from core.models import AuditEntry
from flywheel.models import Project, Step
from tests.core.pii_set import VALUES
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def url(project) -> str:
    return f"/api/v1/projects/{project.pk}/redaction"


def test_a_manager_sees_the_hits_of_recent_episodes_by_kind_with_examples(demo):
    project = demo["project"]
    episode = make_finished_episode(project, demo["task"], steps=[{}])
    Step.objects.filter(episode=episode).update(
        elements=[{"role": "text", "text": VALUES["email"][1], "x": 5, "y": 5, "width": 9, "height": 9}],
        url=f"https://crm.example.com/?from={VALUES['ip'][0]}", human_thought=VALUES["card"][1])
    body = client_for(demo["manager"]).get(url(project)).json()
    assert body["policy"]["enabled"] is True and body["episodes"] == 1
    counts = {row["kind"]: row for row in body["counts"]}
    assert set(counts) == {"email", "ip", "card"}
    assert counts["email"]["where"] == {"element": 1} and counts["card"]["where"] == {"spoken": 1}
    example = counts["email"]["examples"][0]
    assert example["match"] == VALUES["email"][0] and example["before"] == "Send the invoice to "
    assert client_for(demo["annotator"]).get(url(project)).status_code == 403


def test_a_manager_sets_words_and_patterns_and_the_change_is_audited_without_the_words(demo):
    project = demo["project"]
    policy = {"words": ["Margaret Hamilton"], "patterns": [["customer_id", r"CUST-\d{5}"]]}
    response = client_for(demo["manager"]).put(url(project), {"policy": policy}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["policy"]["words"] == ["Margaret Hamilton"]
    stored = Project.objects.get(pk=project.pk).settings["redaction"]
    assert stored["patterns"] == [["customer_id", r"CUST-\d{5}"]] and stored["enabled"] is True
    entry = AuditEntry.objects.get(action="redaction.policy_set")
    assert entry.data["words"] == 1 and entry.data["patterns"] == ["customer_id"]
    assert "Margaret" not in str(entry.data)


def test_a_bad_pattern_is_refused_with_what_to_change_and_nothing_is_stored(demo):
    project = demo["project"]
    response = client_for(demo["manager"]).put(url(project), {"policy": {"patterns": [["customer", "CUST-("]]}},
                                               format="json")
    assert response.status_code == 400
    assert "is not a regular expression" in response.json()["detail"]
    assert "redaction" not in Project.objects.get(pk=project.pk).settings


def test_switching_redaction_off_is_refused_to_a_manager_and_needs_an_admins_reason(demo):
    project = demo["project"]
    off = {"policy": {"enabled": False}}
    refused = client_for(demo["manager"]).put(url(project), off, format="json")
    assert refused.status_code == 403 and "Only a project admin" in refused.json()["detail"]
    no_reason = client_for(demo["admin"]).put(url(project), off, format="json")
    assert no_reason.status_code == 400 and "Say why" in no_reason.json()["detail"]
    assert not AuditEntry.objects.filter(action="redaction.policy_set").exists()
    done = client_for(demo["admin"]).put(url(project), {**off, "reason": "synthetic data only"}, format="json")
    assert done.status_code == 200 and done.json()["policy"]["enabled"] is False
    entry = AuditEntry.objects.get(action="redaction.policy_set")
    assert entry.actor == demo["admin"] and entry.data["reason"] == "synthetic data only"
    assert entry.data["enabled"] is False
