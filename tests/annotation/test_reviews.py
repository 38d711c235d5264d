"""Reviews, reviewer agreement, the dashboard and the review list's filters, through the real API."""
import pytest
from rest_framework.test import APIClient

from annotation.reviews import review_submit
from core.errors import ApplicationError
from core.limits import LIMITS
from core.stats import cohen_kappa
from rollouts.models import Episode
from projects.models import Role
from tests.factories import make_finished_episode, make_member, make_task, make_user

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def put_review(user, episode, **body):
    return client_for(user).put(f"/api/v1/episodes/{episode.pk}/review", {"verdict": "accept", **body}, format="json")


def test_a_review_sets_the_episode_status_and_replaces_the_reviewers_earlier_one(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}])
    first = put_review(demo["manager"], episode, grade=4, step_labels={"1": "wasteful"}, comment="fine")
    assert first.status_code == 200, first.json()
    assert first.json()["review_status"] == "accepted" and first.json()["step_labels"] == {"1": "wasteful"}
    again = put_review(demo["manager"], episode, verdict="reject", grade=2)
    assert again.json()["id"] == first.json()["id"] and again.json()["review_status"] == "rejected"
    reviews = client_for(demo["manager"]).get(f"/api/v1/episodes/{episode.pk}/reviews/").json()["results"]
    assert [(r["reviewer"]["username"], r["verdict"], r["grade"]) for r in reviews] == [("man", "reject", 2)]


def test_disagreeing_reviewers_mark_the_episode_disputed(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}])
    put_review(demo["manager"], episode, grade=5)
    body = put_review(demo["admin"], episode, verdict="reject", grade=1).json()
    assert body["review_status"] == "disputed"
    assert body["review_summary"] == {"reviews": 2, "accepts": 1, "rejects": 1, "grade_mean": 3.0}


def test_bad_reviews_are_refused_with_the_field_named(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}])
    for body, field in [({"verdict": "maybe"}, "verdict"), ({"grade": 7}, "grade"),
                        ({"step_labels": {"5": "good"}}, "step_labels"), ({"step_labels": {"0": "meh"}}, "step_labels"),
                        ({"stars": 3}, "stars")]:
        response = put_review(demo["manager"], episode, **body)
        assert response.status_code == 400 and field in response.json()["errors"], (body, response.json())
    running = Episode.objects.create(project=demo["project"], task=demo["task"], seed=1, status="running")
    assert put_review(demo["manager"], running).status_code == 409
    assert not episode.reviews.exists()


def test_a_review_comment_is_kept_whole_up_to_its_limit_and_refused_past_it_never_cut(demo):
    limit = LIMITS["review_comment"]
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}])
    whole = "a" * (limit - 1) + "z"
    kept = put_review(demo["manager"], episode, comment=whole)
    assert kept.status_code == 200 and kept.json()["comment"] == whole
    over = put_review(demo["manager"], episode, verdict="reject", comment=whole + "!")
    assert over.status_code == 400
    [message] = over.json()["errors"]["comment"]
    assert f"The comment is {limit + 1:,} characters long; the limit is {limit:,}" in message
    assert episode.reviews.get().comment == whole and episode.reviews.get().verdict == "accept"  # nothing changed
    with pytest.raises(ApplicationError) as refused:  # the service refuses too: no path cuts
        review_submit(episode=episode, reviewer=demo["admin"], verdict="accept", comment=whole + "!")
    assert refused.value.errors == {"comment": [message]}
    assert episode.reviews.count() == 1


def test_only_managers_review(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}])
    assert put_review(demo["annotator"], episode).status_code == 403
    assert client_for(demo["annotator"]).get(f"/api/v1/episodes/{episode.pk}/reviews/").status_code == 403
    assert put_review(demo["outsider"], episode).status_code == 404
    assert put_review(demo["staff"], episode).status_code == 200


def test_cohen_kappa_matches_a_worked_example():
    # 10 pairs: both accept 4, both reject 3, disagree 3 -> observed 0.7;
    # rater A accepts 6/10, rater B accepts 5/10 -> expected 0.6*0.5 + 0.4*0.5 = 0.5; kappa = 0.2/0.5 = 0.4
    pairs = [("accept", "accept")] * 4 + [("reject", "reject")] * 3 + [("accept", "reject")] * 2 + [("reject", "accept")]
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("accept", "accept")] * 3) is None  # chance agreement is 1: undefined
    assert cohen_kappa([]) is None


def test_agreement_is_reported_per_project(demo):
    episodes = [make_finished_episode(demo["project"], demo["task"], steps=[{}]) for _ in range(3)]
    for episode, (a, b) in zip(episodes, [("accept", "accept"), ("reject", "reject"), ("accept", "reject")]):
        put_review(demo["manager"], episode, verdict=a)
        put_review(demo["admin"], episode, verdict=b)
    body = client_for(demo["manager"]).get(f"/api/v1/projects/{demo['project'].pk}/agreement").json()
    assert body["episodes_with_multiple_reviews"] == 3
    assert body["agreement"] == pytest.approx(2 / 3, abs=1e-4)
    # pairs (a,a) (r,r) (a,r): observed 2/3; manager accepts 2/3, admin 1/3 -> expected 2/9 + 2/9 = 4/9
    assert body["kappa"] == pytest.approx((2 / 3 - 4 / 9) / (1 - 4 / 9), abs=1e-4)
    assert {r["username"]: r["accepts"] for r in body["reviewers"]} == {"man": 2, "adm": 1}


def test_dashboard_series_count_what_happened(demo):
    project = demo["project"]
    annotator = demo["annotator"]
    make_finished_episode(project, demo["task"], steps=[{}, {"action": None}], reward=1.0)
    make_finished_episode(project, demo["task"], steps=[{"actor": "human", "proposal": {"raw": "x"}}], reward=0.0,
                          mode="supervised", created_by=annotator)
    body = client_for(demo["manager"]).get(f"/api/v1/projects/{project.pk}/dashboard").json()
    (success,) = body["success_by_checkpoint"]
    assert (success["episodes"], success["success_rate"]) == (2, 0.5)
    assert body["interventions"][0]["per_episode"] == 0.5
    assert body["void_rate"][0] == {"day": success["day"], "steps": 3, "rate": pytest.approx(1 / 3, abs=1e-3)}
    assert [(r["username"], r["episodes"]) for r in body["annotator_throughput"]] == [("ann", 1)]
    assert body["dataset_growth"] == [] and "agreement" in body


def list_ids(user, **params) -> list[int]:
    response = client_for(user).get("/api/v1/episodes/", params)
    assert response.status_code == 200, response.json()
    return [e["id"] for e in response.json()["results"]]


def test_review_list_filters_each_narrow_the_episodes(demo):
    project, manager = demo["project"], demo["manager"]
    other_task = make_task(project, "click-link", split="eval")
    base = make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    edited = make_finished_episode(project, other_task, steps=[{"actor": "edited", "proposal": {"raw": "x"}}],
                                   reward=0.0, mode="supervised", created_by=demo["annotator"])
    void = make_finished_episode(project, demo["task"], steps=[{"action": None}, {}, {}], reward=0.5)
    put_review(manager, base)
    p = {"project": project.pk}
    assert list_ids(manager, **p) == [void.pk, edited.pk, base.pk]
    assert list_ids(manager, **p, task=other_task.pk) == [edited.pk]
    assert list_ids(manager, **p, split="eval") == [edited.pk]
    assert list_ids(manager, **p, mode="supervised") == [edited.pk]
    assert list_ids(manager, **p, reward_min=0.4, reward_max=0.6) == [void.pk]
    assert list_ids(manager, **p, has_interventions="true") == [edited.pk]
    assert list_ids(manager, **p, has_void="true") == [void.pk]
    assert list_ids(manager, **p, has_void="false", has_interventions="false") == [base.pk]
    assert list_ids(manager, **p, annotator=demo["annotator"].pk) == [edited.pk]
    assert list_ids(manager, **p, review_status="accepted") == [base.pk]
    assert list_ids(manager, **p, review_status="unreviewed") == [void.pk, edited.pk]
    assert list_ids(manager, **p, ordering="-n_steps")[0] == void.pk  # 3 steps; the others have 1
    assert list_ids(manager, **p, ordering="id") == [base.pk, edited.pk, void.pk]
    today = base.created_at.date().isoformat()
    assert len(list_ids(manager, **p, created_after=today, created_before=today)) == 3
    assert list_ids(manager, **p, created_after="2999-01-01") == []


def test_review_list_pages_by_keyset_without_gaps_or_repeats(demo):
    made = [make_finished_episode(demo["project"], demo["task"], steps=[{}]) for _ in range(5)]
    client = client_for(demo["manager"])
    seen, url = [], f"/api/v1/episodes/?project={demo['project'].pk}&page_size=2&ordering=-n_steps"
    while url:
        body = client.get(url).json()
        seen += [e["id"] for e in body["results"]]
        url = body["next"]
    assert sorted(seen) == sorted(e.pk for e in made) and len(seen) == 5


def test_invalid_review_list_filters_are_refused_naming_the_parameter(demo):
    client = client_for(demo["manager"])
    for params in [{"reward_min": "lots"}, {"has_void": "perhaps"}, {"review_status": "meh"},
                   {"created_after": "12/31/2026"}, {"ordering": "colour"}, {"task": "x"}, {"split": "test"}]:
        response = client.get("/api/v1/episodes/", {"project": demo["project"].pk, **params})
        (name,) = params
        assert response.status_code == 400 and name in response.json()["errors"], (params, response.json())


def test_annotators_see_only_their_projects_episodes_in_the_review_list(demo):
    mine = make_finished_episode(demo["project"], demo["task"], steps=[{}])
    other_task = make_task(demo["other"])
    make_finished_episode(demo["other"], other_task, steps=[{}])
    newcomer = make_user()
    make_member(demo["project"], newcomer, Role.ANNOTATOR)
    assert list_ids(newcomer) == [mine.pk]
    assert client_for(newcomer).get("/api/v1/episodes/", {"project": demo["other"].pk}).status_code == 404


def neighbours(user, episode, **params):
    response = client_for(user).get(f"/api/v1/episodes/{episode.pk}/neighbours", params)
    assert response.status_code == 200, response.json()
    return response.json()["previous"], response.json()["next"]


def test_replay_neighbours_follow_the_review_lists_filters_and_ordering(demo):
    project, manager = demo["project"], demo["manager"]
    a = make_finished_episode(project, demo["task"], steps=[{}, {}])
    b = make_finished_episode(project, demo["task"], steps=[{}])
    c = make_finished_episode(project, demo["task"], steps=[{}, {}])
    d = make_finished_episode(project, demo["task"], steps=[{}])
    p = {"project": project.pk}
    assert neighbours(manager, b, **p) == (c.pk, a.pk)  # newest first: d c b a
    assert neighbours(manager, d, **p) == (None, c.pk)
    assert neighbours(manager, a, **p, ordering="id") == (None, b.pk)
    # -n_steps, ties newest first: c a d b
    assert [neighbours(manager, e, **p, ordering="-n_steps") for e in (c, a, d, b)] == [
        (None, a.pk), (c.pk, d.pk), (a.pk, b.pk), (d.pk, None)]
    # n_steps, ties newest first: d b c a
    assert neighbours(manager, b, **p, ordering="n_steps") == (d.pk, c.pk)
    # A reviewed episode has left the "unreviewed" view, yet its neighbours are still found from it.
    put_review(manager, b)
    assert neighbours(manager, b, **p, review_status="unreviewed") == (c.pk, a.pk)
    bad = client_for(manager).get(f"/api/v1/episodes/{b.pk}/neighbours", {**p, "ordering": "colour"})
    assert bad.status_code == 400 and "ordering" in bad.json()["errors"]
    assert client_for(demo["outsider"]).get(f"/api/v1/episodes/{b.pk}/neighbours", p).status_code == 404
