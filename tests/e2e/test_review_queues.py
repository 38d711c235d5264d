"""Review queues in the real pages: a manager makes a queue from the review list's filters, reviews from it with
"Review next" (the replay goes on to the next episode after the review is saved), and settles the one episode on
which another reviewer disagreed."""
import pytest

from annotation import queues, reviews
from annotation.models import QueueItem, ReviewQueue
from rollouts.models import Episode
from projects.models import Role
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_manager_queues_reviews_next_and_adjudicates_a_disagreement(daphne_server, page):
    project = make_project("Queued")
    manager, annotator = make_user("queuer"), make_user("second")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    task = make_task(project, "click-button")
    first, second = [make_finished_episode(project, task, steps=[{}, {}]) for _ in range(2)]

    login(page, daphne_server, "queuer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("review-row").first.wait_for()
    page.get_by_test_id("queue-new").click()
    page.get_by_test_id("queue-name").fill("double check")
    page.get_by_test_id("queue-overlap").select_option("2")
    page.get_by_test_id("queue-assignee-queuer").check()
    page.get_by_test_id("queue-assignee-second").check()
    page.get_by_test_id("queue-create").click()
    page.get_by_test_id("queue-row").wait_for()
    queue = ReviewQueue.objects.get(project=project)
    assert queue.overlap == 2 and queue.filter == {"status": "finished", "review_status": "unreviewed"}
    assert sorted(queue.items.values_list("episode_id", flat=True)) == [first.pk, second.pk]
    screenshot(page, "review-queues")

    # the other reviewer rejects the first episode from the same queue
    queues.queue_next(queue=queue, reviewer=annotator)
    reviews.review_submit(episode=first, reviewer=annotator, verdict="reject")

    page.get_by_test_id("queue-review-next").click()
    page.get_by_test_id("queue-bar").wait_for()
    assert f"/review/{first.pk}?queue={queue.pk}" in page.url
    page.get_by_test_id("verdict-accept").click()
    page.get_by_test_id("review-submit").click()
    page.wait_for_url(f"**/review/{second.pk}?queue={queue.pk}*")  # on to the next, by itself
    page.get_by_test_id("verdict-accept").click()
    page.get_by_test_id("review-submit").click()
    page.get_by_test_id("queue-empty").wait_for()  # nothing left for this reviewer
    assert QueueItem.objects.get(queue=queue, episode=first).state == "adjudication"
    assert QueueItem.objects.get(queue=queue, episode=second).reviews_done == 1

    page.goto(f"{daphne_server}/projects/{project.pk}/review/queues/{queue.pk}")
    item = page.get_by_test_id("adjudication-item")
    item.wait_for()
    sides = item.get_by_test_id("adjudication-review").all_inner_texts()
    assert any("queuer" in s and "accept" in s for s in sides) and any("second" in s and "reject" in s for s in sides)
    assert page.get_by_test_id("queue-reviews-done").inner_text() == "3"
    item.get_by_test_id("adjudication-comment").fill("the button was never clicked")
    item.get_by_test_id("adjudicate-reject").click()
    page.wait_for_function("() => document.querySelector('[data-testid=adjudication-item]').dataset.state === 'adjudicated'")
    screenshot(page, "review-queue-adjudicated")
    assert Episode.objects.get(pk=first.pk).review_status == "rejected"
    assert QueueItem.objects.get(queue=queue, episode=first).final_verdict == "reject"


def test_an_assigned_annotator_reviews_only_through_the_queue(daphne_server, page):
    project = make_project("Queued for annotators")
    manager, annotator = make_user("boss"), make_user("helper")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    task = make_task(project, "click-button")
    episode = make_finished_episode(project, task, steps=[{}])
    queue = queues.queue_create(project=project, actor=manager, name="for helper", filter={}, overlap=1,
                                assignees=[annotator.pk])

    login(page, daphne_server, "helper", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("queue-review-next").click()
    page.get_by_test_id("queue-bar").wait_for()
    page.get_by_test_id("judge-panel").wait_for(state="detached")  # the judge is the managers'
    page.get_by_test_id("verdict-reject").click()
    page.get_by_test_id("review-submit").click()
    page.get_by_test_id("queue-empty").wait_for()
    assert Episode.objects.get(pk=episode.pk).review_status == "rejected"
    assert QueueItem.objects.get(queue=queue).state == "done"
    screenshot(page, "review-queue-annotator")
