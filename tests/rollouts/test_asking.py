"""Asking a person when the policy is unsure: the floor setting, the person queue's order, the calibration card."""
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from rollouts import asking
from rollouts.models import Episode, EpisodeStatus, Step
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def project():
    project = make_project()
    make_member(project, make_user("boss"), role="manager")
    make_member(project, make_user("ann"))
    return project


def test_the_floor_is_off_by_default_and_a_manager_sets_it(project):
    boss, ann = client_for(project.memberships.get(role="manager").user), client_for(project.memberships.get(role="annotator").user)
    url = f"/api/v1/projects/{project.pk}/asking"
    assert ann.get(url).json() == {"ask_below": None}
    assert ann.patch(url, {"ask_below": 0.5}, format="json").status_code == 403
    assert boss.patch(url, {"ask_below": 0.5}, format="json").json() == {"ask_below": 0.5}
    assert asking.ask_floor(project.pk) == 0.5
    assert boss.patch(url, {"ask_below": None}, format="json").json() == {"ask_below": None}


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2, "half", True, [0.5]])
def test_a_floor_outside_0_to_1_is_refused_plainly_and_the_old_one_kept(project, bad):
    boss = client_for(project.memberships.get(role="manager").user)
    url = f"/api/v1/projects/{project.pk}/asking"
    boss.patch(url, {"ask_below": 0.4}, format="json")
    response = boss.patch(url, {"ask_below": bad}, format="json")
    assert response.status_code == 400 and "between 0 and 1" in response.json()["detail"]
    assert asking.ask_floor(project.pk) == 0.4


def test_an_unknown_setting_is_refused(project):
    boss = client_for(project.memberships.get(role="manager").user)
    response = boss.patch(f"/api/v1/projects/{project.pk}/asking", {"ask_under": 0.4}, format="json")
    assert response.status_code == 400 and "ask_under" in response.json()["detail"]


def test_only_autonomous_proposals_under_the_floor_ask():
    assert asking.should_ask(mode="autonomous", confidence=0.31, floor=0.5)
    assert not asking.should_ask(mode="autonomous", confidence=0.5, floor=0.5)
    assert not asking.should_ask(mode="autonomous", confidence=None, floor=0.5)  # no logprobs: nothing to go by
    assert not asking.should_ask(mode="autonomous", confidence=0.1, floor=None)  # off
    assert not asking.should_ask(mode="supervised", confidence=0.1, floor=0.5)  # a person decides every step
    assert asking.ask_reason(0.3125, 0.5) == "confidence 0.31 < 0.5"


def test_the_person_queue_lists_asks_longest_wait_first_and_an_answered_one_leaves_it(project):
    task = make_task(project)
    first, second = (Episode.objects.create(project=project, task=task, seed=s, status=EpisodeStatus.RUNNING)
                     for s in (1, 2))
    asking.episode_ask_open(episode_id=second.pk, reason="confidence 0.40 < 0.5")
    asking.episode_ask_open(episode_id=first.pk, reason="confidence 0.20 < 0.5")
    Episode.objects.filter(pk=second.pk).update(asked_at=timezone.now() - timedelta(seconds=30))
    ann = client_for(project.memberships.get(role="annotator").user)
    queue = ann.get(f"/api/v1/projects/{project.pk}/asks").json()
    assert [(a["episode"], a["reason"]) for a in queue] == [(second.pk, "confidence 0.40 < 0.5"),
                                                           (first.pk, "confidence 0.20 < 0.5")]
    assert queue[0]["waited_seconds"] >= 30 > queue[1]["waited_seconds"]
    assert Episode.objects.get(pk=first.pk).status == EpisodeStatus.PAUSED
    asking.episode_ask_close(episode_id=second.pk)
    assert [a["episode"] for a in ann.get(f"/api/v1/projects/{project.pk}/asks").json()] == [first.pk]
    assert Episode.objects.get(pk=second.pk).status == EpisodeStatus.RUNNING
    outsider = client_for(make_user("stranger"))
    assert outsider.get(f"/api/v1/projects/{project.pk}/asks").status_code == 404


def test_calibration_counts_how_often_each_bucket_was_good_and_suggests_a_floor(project):
    task = make_task(project)
    edited = {"actor": "edited", "proposal": {"thought": "t", "action": {"name": "click", "args": {"x": 1, "y": 1}}}}
    # low confidence: 1 good of 4; high: 4 good of 4; one rejected proposal at 0.35 (bad)
    specs = [({}, 0.15), (edited, 0.12), (edited, 0.18), (edited, 0.11), ({}, 0.85), ({}, 0.82), ({}, 0.95), ({}, 0.91)]
    episode = make_finished_episode(project, task, mode="supervised", steps=[spec for spec, _ in specs])
    for (spec, confidence), step in zip(specs, episode.steps.order_by("index")):
        Step.objects.filter(pk=step.pk).update(confidence=confidence)
    rejected = make_finished_episode(project, task, mode="supervised", steps=[
        {"rejections": [{"action": {"name": "click", "args": {"x": 3, "y": 3}}, "reason": "no"}]}])
    rejected.rejections.update(confidence=0.35)
    Step.objects.filter(episode=rejected).update(confidence=0.9)  # approved after the reject: not good as proposed
    card = client_for(project.memberships.get(role="manager").user).get(
        f"/api/v1/projects/{project.pk}/asking/calibration").json()
    by_low = {b["low"]: b for b in card["buckets"]}
    assert (by_low[0.1]["steps"], by_low[0.1]["good"]) == (4, 0.25)
    assert (by_low[0.3]["steps"], by_low[0.3]["good"]) == (1, 0.0)
    assert (by_low[0.9]["steps"], by_low[0.9]["good"]) == (3, pytest.approx(2 / 3, abs=1e-3))
    floors = {f["floor"]: f for f in card["floors"]}
    assert floors[0.5]["asked"] == pytest.approx(4 / 9, abs=1e-3)  # 4 of the 9 steps are under 0.5
    assert card["suggested"] is None  # above every floor a step approved only after a reject stays: < 90 % good
    Step.objects.filter(episode=rejected).update(confidence=0.45)
    card = client_for(project.memberships.get(role="manager").user).get(
        f"/api/v1/projects/{project.pk}/asking/calibration").json()
    assert card["suggested"] == 0.5
    annotator = client_for(project.memberships.get(role="annotator").user)
    assert annotator.get(f"/api/v1/projects/{project.pk}/asking/calibration").status_code == 403
