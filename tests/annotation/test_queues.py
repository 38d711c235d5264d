"""Review queues through the real API and PostgreSQL: creation, next / hold / release / expiry, two
reviewers grabbing at once, disagreement -> adjudication -> final verdict, agreement, permissions."""
import datetime as dt
import threading

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from annotation import queues
from annotation.models import ClaimState, QueueClaim, QueueItem, ReviewQueue
from core.audit import AuditEntry
from core.errors import ApplicationError
from core.limits import LIMITS
from core.stats import cohen_kappa
from rollouts.models import Episode
from projects.models import Role
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def world(demo):
    """The demo project with three finished episodes and two more annotators."""
    project, task = demo["project"], demo["task"]
    extra = {name: make_user(name) for name in ("ann2", "ann3")}
    for user in extra.values():
        make_member(project, user, Role.ANNOTATOR)
    episodes = [make_finished_episode(project, task, steps=[{}]) for _ in range(3)]
    return {**demo, **extra, "episodes": episodes}


def create(user, project, **body):
    return client_for(user).post(f"/api/v1/projects/{project.pk}/review-queues/", body, format="json")


def make_queue(w, *, overlap=2, assignees=("annotator", "ann2", "ann3"), **filter):
    response = create(w["manager"], w["project"], name=f"q{ReviewQueue.objects.count()}", overlap=overlap,
                      filter=filter, assignees=[w[a].pk for a in assignees])
    assert response.status_code == 201, response.json()
    return response.json()


def next_for(user, queue_id):
    response = client_for(user).post(f"/api/v1/review-queues/{queue_id}/next")
    assert response.status_code == 200, response.json()
    return response.json()


def review(user, episode_id, verdict="accept"):
    return client_for(user).put(f"/api/v1/episodes/{episode_id}/review", {"verdict": verdict}, format="json")


@pytest.mark.django_db
def test_a_queue_holds_the_filtered_finished_episodes(world):
    running = Episode.objects.create(project=world["project"], task=world["task"], seed=1, status="running")
    body = make_queue(world, overlap=2)
    items = QueueItem.objects.filter(queue_id=body["id"])
    assert sorted(items.values_list("episode_id", flat=True)) == sorted(e.pk for e in world["episodes"])
    assert running.pk not in items.values_list("episode_id", flat=True)
    assert body["progress"]["items"] == 3 and body["progress"]["pending"] == 3 and body["progress"]["reviews_needed"] == 6
    other_task = make_task(world["project"], "click-link")
    only = make_finished_episode(world["project"], other_task, steps=[{}])
    assert make_queue(world, overlap=1, task=other_task.pk)["progress"]["items"] == 1
    assert QueueItem.objects.filter(queue__name="q1").get().episode_id == only.pk


@pytest.mark.django_db
def test_bad_queues_are_refused_naming_the_field(world):
    p, ids = world["project"], [world["annotator"].pk, world["ann2"].pk]
    cases = [({"name": "", "overlap": 1, "assignees": ids}, "name"),
             ({"name": "a", "overlap": 0, "assignees": ids}, "overlap"),
             ({"name": "a", "overlap": 6, "assignees": ids}, "overlap"),
             ({"name": "a", "overlap": 3, "assignees": ids}, "overlap"),  # more reviewers than assignees
             ({"name": "a", "overlap": 1, "assignees": []}, "assignees"),
             ({"name": "a", "overlap": 1, "assignees": [world["outsider"].pk]}, "assignees"),
             ({"name": "a", "overlap": 1, "assignees": ids, "filter": {"colour": "red"}}, "filter"),
             ({"name": "a", "overlap": 1, "assignees": ids, "filter": {"status": "dancing"}}, "status"),
             ({"name": "a", "overlap": 1, "assignees": ids, "filter": {"review_status": "accepted"}}, "filter"),
             ({"name": "a", "overlap": 1, "assignees": ids, "size": 3}, "size")]
    for body, field in cases:
        response = create(world["manager"], p, **body)
        assert response.status_code == 400 and field in response.json()["errors"], (body, response.json())
    assert not ReviewQueue.objects.exists()
    make_queue(world)
    again = create(world["manager"], p, name="q0", overlap=1, assignees=ids)
    assert again.status_code == 400 and "already has a queue" in again.json()["detail"]


@pytest.mark.django_db
def test_a_queue_name_and_an_adjudication_comment_are_refused_past_their_limits_never_cut(world):
    ids = [world["annotator"].pk, world["ann2"].pk]
    name = "n" * LIMITS["queue_name"]
    long = create(world["manager"], world["project"], name=name + "x", overlap=1, assignees=ids)
    assert long.status_code == 400
    assert f"The queue name is {len(name) + 1:,} characters long" in long.json()["errors"]["name"][0]
    assert not ReviewQueue.objects.exists()
    with pytest.raises(ApplicationError):  # the service refuses too
        queues.queue_create(project=world["project"], actor=world["manager"], name=name + "x", filter={}, overlap=1,
                            assignees=ids)
    queue = create(world["manager"], world["project"], name=name, overlap=2, assignees=ids).json()
    assert ReviewQueue.objects.get(pk=queue["id"]).name == name  # whole at the limit
    item = next_for(world["annotator"], queue["id"])
    next_for(world["ann2"], queue["id"])
    review(world["annotator"], item["episode"], "accept")
    review(world["ann2"], item["episode"], "reject")
    url = f"/api/v1/queue-items/{item['item']}/adjudicate"
    comment = "c" * LIMITS["adjudication_comment"]
    over = client_for(world["manager"]).post(url, {"verdict": "reject", "comment": comment + "!"}, format="json")
    assert over.status_code == 400 and "the limit is" in over.json()["errors"]["comment"][0]
    assert QueueItem.objects.get(pk=item["item"]).state == "adjudication"
    done = client_for(world["manager"]).post(url, {"verdict": "reject", "comment": comment}, format="json")
    assert done.status_code == 200 and QueueItem.objects.get(pk=item["item"]).adjudication_comment == comment


@pytest.mark.django_db
def test_next_holds_an_item_and_the_same_reviewer_gets_it_again_until_they_review(world):
    queue = make_queue(world, overlap=1)
    first = next_for(world["annotator"], queue["id"])
    assert first["episode"] == world["episodes"][0].pk
    assert next_for(world["annotator"], queue["id"])["item"] == first["item"]
    # overlap 1: the held item is not offered to another reviewer
    assert next_for(world["ann2"], queue["id"])["episode"] == world["episodes"][1].pk
    assert review(world["annotator"], first["episode"]).status_code == 200
    item = QueueItem.objects.get(pk=first["item"])
    assert item.state == "done" and item.reviews_done == 1
    after = next_for(world["annotator"], queue["id"])
    assert after["episode"] == world["episodes"][2].pk and after["reviewed_by_you"] == 1


@pytest.mark.django_db
def test_release_and_skip_free_the_item_and_an_expired_hold_frees_its_place(world):
    queue = make_queue(world, overlap=1)
    held = next_for(world["annotator"], queue["id"])
    release = client_for(world["annotator"]).post(f"/api/v1/queue-items/{held['item']}/release", {}, format="json")
    assert release.status_code == 200
    assert next_for(world["ann2"], queue["id"])["item"] == held["item"]  # released: free for another
    skip = client_for(world["ann2"]).post(f"/api/v1/queue-items/{held['item']}/release", {"skip": True}, format="json")
    assert skip.status_code == 200
    assert next_for(world["ann2"], queue["id"])["item"] != held["item"]  # skipped: never again for them
    # the annotator holds the first item; once the hold has expired another reviewer gets it
    assert next_for(world["annotator"], queue["id"])["item"] == held["item"]
    QueueClaim.objects.filter(item_id=held["item"], reviewer=world["annotator"]).update(
        held_until=timezone.now() - dt.timedelta(seconds=1))
    assert next_for(world["ann3"], queue["id"])["item"] == held["item"]
    # and the expired holder may no longer review it (an annotator reviews only what they hold)
    late = review(world["annotator"], held["episode"])
    assert late.status_code == 403 and "Review next" in late.json()["detail"]


@pytest.mark.django_db
def test_adjudication_of_disagreeing_reviews_sets_the_final_verdict(world):
    queue = make_queue(world, overlap=2, assignees=("annotator", "ann2"))
    a = next_for(world["annotator"], queue["id"])
    b = next_for(world["ann2"], queue["id"])
    assert a["item"] == b["item"]
    assert review(world["annotator"], a["episode"], "accept").status_code == 200
    assert QueueItem.objects.get(pk=a["item"]).state == "pending"
    body = review(world["ann2"], a["episode"], "reject").json()
    assert body["review_status"] == "disputed"
    assert QueueItem.objects.get(pk=a["item"]).state == "adjudication"
    side = client_for(world["manager"]).get(f"/api/v1/queue-items/{a['item']}/").json()
    assert [(r["reviewer"]["username"], r["verdict"]) for r in side["reviews"]] == [("ann", "accept"), ("ann2", "reject")]
    assert client_for(world["annotator"]).post(f"/api/v1/queue-items/{a['item']}/adjudicate",
                                               {"verdict": "accept"}, format="json").status_code == 403
    bad = client_for(world["manager"]).post(f"/api/v1/queue-items/{a['item']}/adjudicate", {"verdict": "maybe"},
                                            format="json")
    assert bad.status_code == 400 and "verdict" in bad.json()["errors"]
    done = client_for(world["manager"]).post(f"/api/v1/queue-items/{a['item']}/adjudicate",
                                             {"verdict": "reject", "comment": "the form was left empty"}, format="json")
    assert done.status_code == 200, done.json()
    assert done.json()["state"] == "adjudicated" and done.json()["review_status"] == "rejected"
    episode = Episode.objects.get(pk=a["episode"])
    assert episode.review_status == "rejected" and episode.review_summary["final_verdict"] == "reject"
    assert AuditEntry.objects.filter(action="queue.adjudicate").count() == 1
    # a later review of the episode does not overturn the manager's verdict
    review(world["manager"], a["episode"], "accept")
    assert Episode.objects.get(pk=a["episode"]).review_status == "rejected"
    # an item whose reviews agree is not adjudicated
    c = next_for(world["annotator"], queue["id"])
    next_for(world["ann2"], queue["id"])
    review(world["annotator"], c["episode"])
    review(world["ann2"], c["episode"])
    again = client_for(world["manager"]).post(f"/api/v1/queue-items/{c['item']}/adjudicate", {"verdict": "reject"},
                                              format="json")
    assert again.status_code == 409
    assert Episode.objects.get(pk=c["episode"]).review_status == "accepted"


@pytest.mark.django_db
def test_queue_page_shows_progress_and_agreement_per_queue_and_reviewer(world):
    queue = make_queue(world, overlap=2, assignees=("annotator", "ann2"))
    verdicts = {"annotator": ["accept", "accept", "reject"], "ann2": ["accept", "reject", "reject"]}
    for n in range(3):
        for who in ("annotator", "ann2"):
            claim = next_for(world[who], queue["id"])
            assert review(world[who], claim["episode"], verdicts[who][n]).status_code == 200
    middle = QueueItem.objects.get(queue_id=queue["id"], episode=world["episodes"][1])
    client_for(world["manager"]).post(f"/api/v1/queue-items/{middle.pk}/adjudicate", {"verdict": "accept"}, format="json")
    body = client_for(world["manager"]).get(f"/api/v1/review-queues/{queue['id']}/").json()
    assert body["progress"]["done"] == 2 and body["progress"]["adjudicated"] == 1 and body["progress"]["reviews_done"] == 6
    assert [(r["username"], r["reviewed"]) for r in body["progress"]["reviewers"]] == [("ann", 3), ("ann2", 3)]
    agreement = body["agreement"]
    pairs = [("accept", "accept"), ("accept", "reject"), ("reject", "reject")]
    assert agreement["items_with_multiple_reviews"] == 3 and agreement["agreement"] == round(2 / 3, 4)
    assert agreement["kappa"] == round(cohen_kappa(pairs), 4)
    per = {r["username"]: r for r in agreement["reviewers"]}
    # settled verdicts: accept, accept (adjudicated), reject; ann matched all three, ann2 two of three
    assert per["ann"]["agreement"] == 1.0 and per["ann2"]["agreement"] == round(2 / 3, 4)
    assert per["ann2"]["kappa"] == round(cohen_kappa([("accept", "accept"), ("reject", "accept"),
                                                      ("reject", "reject")]), 4)
    assert [i["state"] for i in body["adjudication"]] == ["adjudicated"]
    # an assignee sees progress but not the managers' agreement
    mine = client_for(world["annotator"]).get(f"/api/v1/review-queues/{queue['id']}/").json()
    assert "agreement" not in mine and mine["progress"]["items"] == 3


@pytest.mark.django_db
def test_who_may_use_queues(world):
    queue = make_queue(world, overlap=1, assignees=("annotator",))
    qid = queue["id"]
    assert create(world["annotator"], world["project"], name="x", overlap=1,
                  assignees=[world["annotator"].pk]).status_code == 403
    outsider, stranger_project = world["outsider"], make_project("Gamma")
    make_member(stranger_project, outsider, Role.ANNOTATOR)
    assert client_for(outsider).get(f"/api/v1/review-queues/{qid}/").status_code == 404
    assert client_for(outsider).post(f"/api/v1/review-queues/{qid}/next").status_code == 404
    assert client_for(world["ann2"]).post(f"/api/v1/review-queues/{qid}/next").status_code == 403  # not assigned
    assert client_for(world["manager"]).post(f"/api/v1/review-queues/{qid}/next").status_code == 403
    listed = client_for(world["ann2"]).get(f"/api/v1/projects/{world['project'].pk}/review-queues/").json()
    assert listed["results"] == []
    held = next_for(world["annotator"], qid)
    assert client_for(world["annotator"]).get(f"/api/v1/queue-items/{held['item']}/").status_code == 403
    assert review(world["ann2"], held["episode"]).status_code == 403  # annotator not holding it
    closed = client_for(world["manager"]).patch(f"/api/v1/review-queues/{qid}/", {"state": "closed"}, format="json")
    assert closed.status_code == 200
    assert client_for(world["annotator"]).post(f"/api/v1/review-queues/{qid}/next").status_code == 409
    assert review(world["annotator"], held["episode"]).status_code == 403  # a closed queue's holds lapse


@pytest.mark.django_db(transaction=True)
def test_two_reviewers_grabbing_at_once_never_exceed_the_overlap(demo):
    """Eight reviewers ask for the next item of a 3-episode, overlap-2 queue at the same moment, each on
    its own thread and PostgreSQL connection; every item ends up held by at most two of them."""
    project, task = demo["project"], demo["task"]
    reviewers = [make_user(f"r{n}") for n in range(8)]
    for user in reviewers:
        make_member(project, user, Role.ANNOTATOR)
    episodes = [make_finished_episode(project, task, steps=[{}]) for _ in range(3)]
    queue = queues.queue_create(project=project, actor=demo["manager"], name="race", filter={}, overlap=2,
                                assignees=[u.pk for u in reviewers])
    assert len(episodes) == queue.items.count()
    start = threading.Barrier(len(reviewers))
    got, errors = {}, []

    def grab(user):
        try:
            start.wait()
            claim = queues.queue_next(queue=queue, reviewer=user)
            got[user.username] = claim.item_id if claim else None
        except Exception as exc:  # reported below: a thread's failure must fail the test
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=grab, args=(u,)) for u in reviewers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    held = [i for i in got.values() if i is not None]
    assert len(held) == 6 and list(got.values()).count(None) == 2  # 3 items x overlap 2; two left empty-handed
    assert all(held.count(i) == 2 for i in set(held))
    assert QueueClaim.objects.filter(state=ClaimState.HELD).count() == 6
