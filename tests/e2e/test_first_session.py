"""A new annotator's first supervised session, done as they would in the real page (Chromium, daphne, a real
worker; the scripted backend proposes the task's solution): the task's instruction stays above the screen; an edit
that changes only the action asks for the person's own thought instead of passing the model's off as theirs; the
takeover's Why stays for each action until cleared; Finish has no outcome chosen, and the person's success is
scored by the page's own check, which disagrees (the page was not solved): both are kept and shown, and the replay
shows the instruction, the comment and why the episode waits for a review."""
import pytest

from training import deployments
from rollouts.models import Checkpoint, Episode, Step
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

CORNER = "click(x=3, y=207)"
WHY = "Checking what the empty corner does."
COMMENT = "Clicked the corners on purpose; the button was never pressed."


@pytest.fixture
def first_project():
    project = make_project("First session")
    make_member(project, make_user("newcomer"))
    make_member(project, make_user("lead"), "manager")
    task = make_task(project, "click-button", max_steps=10)
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    return project, task


def click_corner(page) -> None:
    image = page.get_by_test_id("episode-screenshot")
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    image.click(position={"x": box["width"] * 4 / 160, "y": box["height"] * 206 / 210})


def test_a_new_annotators_first_session_keeps_what_they_typed_and_scores_their_finish(
        daphne_server, celery_worker, browser, page, first_project):
    project, task = first_project
    login(page, daphne_server, "newcomer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/episodes")
    page.get_by_test_id("start-seed").fill("3")
    page.get_by_test_id("start-submit").click()
    page.wait_for_url("**/episodes/*", timeout=30_000)
    episode_id = int(page.url.rstrip("/").split("/")[-1])

    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=60_000)
    instruction = page.get_by_test_id("instruction-text")
    wait_for(lambda: instruction.inner_text().startswith("Click on the"), 30, what="the instruction")
    asked = instruction.inner_text()
    assert instruction.bounding_box()["y"] < page.get_by_test_id("episode-screenshot").bounding_box()["y"]
    screenshot(page, "first-session-instruction")

    page.get_by_test_id("cmd-edit").click()
    model_thought = page.get_by_test_id("edit-thought").input_value()
    assert model_thought  # the form starts from the model's thought
    page.get_by_test_id("edit-action").fill(CORNER)
    page.get_by_test_id("edit-thought-error").wait_for(timeout=5_000)
    assert page.get_by_test_id("edit-submit").is_disabled()
    screenshot(page, "first-session-edit-asks-for-a-thought")
    page.get_by_test_id("edit-thought-clear").click()
    page.get_by_test_id("edit-submit").click()
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=0).exists(), 60, what="the edited step")
    edited = Step.objects.get(episode_id=episode_id, index=0)
    assert (edited.actor, edited.action_text, edited.thought) == ("edited", CORNER, "")
    assert edited.proposal["thought"] == model_thought  # the model's thought stays the model's

    page.locator('[data-testid="proposal"][data-index="1"]').wait_for(timeout=60_000)
    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("cmd-handback").wait_for(timeout=30_000)
    page.get_by_test_id("act-thought").fill(WHY)
    click_corner(page)
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(), 60, what="the first own step")
    page.locator('[data-testid="proposal"][data-index="2"]').wait_for(timeout=60_000)
    assert page.get_by_test_id("act-thought").input_value() == WHY  # still there for the next action
    click_corner(page)
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=2).exists(), 60, what="the second own step")
    assert list(Step.objects.filter(episode_id=episode_id, index__in=[1, 2]).values_list("thought", flat=True)) == \
        [WHY, WHY]
    screenshot(page, "first-session-takeover-why-kept")

    page.locator('[data-testid="proposal"][data-index="3"]').wait_for(timeout=60_000)
    page.get_by_test_id("cmd-finish").click()
    assert page.get_by_test_id("finish-outcome").input_value() == ""
    page.get_by_test_id("finish-submit").click()
    page.get_by_test_id("finish-outcome-error").wait_for(timeout=5_000)
    page.get_by_test_id("finish-outcome").select_option("success")
    page.get_by_test_id("finish-comment").fill(COMMENT)
    page.get_by_test_id("finish-submit").click()
    page.get_by_test_id("episode-finished").wait_for(timeout=60_000)
    page.get_by_test_id("review-reason").wait_for(timeout=30_000)
    assert page.get_by_test_id("finish-comment-text").inner_text() == COMMENT
    assert page.get_by_test_id("finished-reward").inner_text() == "0"  # the page's own check: not solved
    screenshot(page, "first-session-finished")
    episode = Episode.objects.get(pk=episode_id)
    assert (episode.outcome, episode.env_reward, episode.comment) == ("success", 0.0, COMMENT)
    assert episode.review_reason.startswith("A person finished with success")
    assert page.errors == []

    lead = browser.new_context(viewport={"width": 1280, "height": 860})
    page = lead.new_page()
    login(page, daphne_server, "lead", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode_id}")
    page.get_by_test_id("replay").wait_for(timeout=30_000)
    assert page.get_by_test_id("instruction-text").inner_text() == asked
    assert page.get_by_test_id("finish-comment-text").inner_text() == COMMENT
    assert "the task's own check paid 0" in page.get_by_test_id("review-reason").inner_text()
    screenshot(page, "first-session-replay")
    lead.close()
