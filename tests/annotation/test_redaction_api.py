"""A project's redaction policy through the real API (issue 40): managers see what it finds in recent episodes, by
kind with examples, and change it; switching it off needs an admin and a reason, and every change is audited
without the word list."""
import pytest
from rest_framework.test import APIClient

from core.models import AuditEntry
from projects.models import Project
from rollouts.models import Step
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


def test_a_reviewers_marks_of_a_wrong_hit_and_a_miss_give_precision_and_recall(demo):
    project = demo["project"]
    episode = make_finished_episode(project, demo["task"], steps=[{}, {}])
    Step.objects.filter(episode=episode, index=0).update(elements=[
        {"role": "text", "text": f"Mail {VALUES['email'][0]} or build 10.0.0.7", "x": 5, "y": 5, "width": 9, "height": 9}])
    Step.objects.filter(episode=episode, index=1).update(elements=[
        {"role": "text", "text": "Mail ops@example.net", "x": 5, "y": 5, "width": 9, "height": 9}])
    client = client_for(demo["manager"])
    marks = f"/api/v1/projects/{project.pk}/redaction/marks"
    wrong = client.post(marks, {"kind": "ip", "verdict": "wrong_hit", "text": "10.0.0.7", "episode": episode.pk,
                                "step": 0}, format="json")
    assert wrong.status_code == 201, wrong.content
    assert client.post(marks, {"kind": "email", "verdict": "missed", "text": "jane at example dot org"},
                       format="json").status_code == 201
    again = client.post(marks, {"kind": "email", "verdict": "missed", "text": "jane at example dot org"}, format="json")
    counts = {row["kind"]: row for row in again.json()["counts"]}  # the same mark twice is one
    assert (counts["ip"]["hits"], counts["ip"]["wrong_hits"], counts["ip"]["precision"]) == (1, 1, 0.0)
    assert (counts["email"]["hits"], counts["email"]["precision"], counts["email"]["missed"]) == (2, 1.0, 1)
    assert counts["email"]["recall"] == round(2 / 3, 4)

    bad = client.post(marks, {"kind": "email", "verdict": "maybe", "text": "x"}, format="json")
    assert bad.status_code == 400
    other = client.post(marks, {"kind": "email", "verdict": "missed", "text": "x", "episode": 999999}, format="json")
    assert other.status_code == 404 and "not one of this project's" in other.json()["detail"]
    assert client_for(demo["annotator"]).post(marks, {"kind": "email", "verdict": "missed", "text": "y"},
                                              format="json").status_code == 403


def test_keeping_originals_is_refused_to_a_manager_and_needs_an_admins_reason(demo):
    project = demo["project"]
    keep = {"policy": {"keep_originals": True}}
    refused = client_for(demo["manager"]).put(url(project), keep, format="json")
    assert refused.status_code == 403 and "keep originals" in refused.json()["detail"]
    assert client_for(demo["admin"]).put(url(project), keep, format="json").status_code == 400
    done = client_for(demo["admin"]).put(url(project), {**keep, "reason": "replays of typed forms"}, format="json")
    assert done.status_code == 200 and done.json()["policy"]["keep_originals"] is True
    assert AuditEntry.objects.get(action="redaction.policy_set").data["keep_originals"] is True
    # a manager's later change that keeps them is no new risk: allowed
    kept = client_for(demo["manager"]).put(url(project), {"policy": {"keep_originals": True, "words": ["Ann"]}},
                                           format="json")
    assert kept.status_code == 200, kept.content


def test_values_hidden_when_stored_are_counted_by_label_and_a_wrong_hit_is_marked_in_its_context(demo):
    project = demo["project"]
    episode = make_finished_episode(project, demo["task"], steps=[{"thought": f"mail {VALUES['email'][0]} now"}])
    assert Step.objects.get(episode=episode).thought == "mail [EMAIL] now"  # stored redacted
    client = client_for(demo["manager"])
    counts = {row["kind"]: row for row in client.get(url(project)).json()["counts"]}
    example = counts["email"]["examples"][0]
    assert counts["email"]["hits"] == 1 and counts["email"]["where"] == {"thought": 1}
    assert (example["before"], example["match"], example["after"], example["hidden"]) == ("mail ", "[EMAIL]", " now",
                                                                                          True)
    marked = client.post(f"/api/v1/projects/{project.pk}/redaction/marks",
                         {"kind": "email", "verdict": "wrong_hit", "text": "mail [EMAIL] now"}, format="json")
    email = {row["kind"]: row for row in marked.json()["counts"]}["email"]
    assert (email["wrong_hits"], email["precision"]) == (1, 0.0)
