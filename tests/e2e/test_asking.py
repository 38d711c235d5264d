"""The policy asks a person when it is unsure, in the browser: an autonomous episode's unsure proposal waits on the
Live sessions page with its reason; the annotator opens it, sees the model's confidence, approves, and the episode
runs on alone to its end. The manager sets the floor and reads the calibration card on the project's settings."""
import pytest

from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus, Step
from tests.annotation.unsure import unsure_stack  # noqa: F401
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_annotator_answers_an_unsure_step_from_the_queue_and_the_episode_runs_on(unsure_stack, page):
    base, project, task, annotator = unsure_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[5], mode="autonomous",
                                         actor=annotator)[0].pk
    login(page, base, "asked", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=60_000)
    page.goto(f"{base}/projects/{project.pk}/episodes")
    item = page.get_by_test_id("ask-item")
    item.wait_for(timeout=180_000)
    assert "Step 1: unsure (confidence 0.31 < 0.5)" in item.inner_text()
    screenshot(page, "asks-waiting")
    item.click()
    page.get_by_test_id("proposal-unsure").wait_for(timeout=60_000)
    assert "confidence 0.31 < 0.5" in page.get_by_test_id("proposal-unsure").inner_text()
    assert page.get_by_test_id("proposal-confidence").inner_text() == "confidence 0.31"
    screenshot(page, "session-unsure")
    page.get_by_test_id("cmd-approve").click()
    wait_for(lambda: Episode.objects.get(pk=episode_id).status == EpisodeStatus.FINISHED, 180, what="the episode's end")
    assert list(Step.objects.filter(episode_id=episode_id).order_by("index").values_list("actor", flat=True)) == \
        ["model", "model", "model"]
    page.get_by_test_id("episode-status").and_(page.locator('[data-status="finished"]')).wait_for(timeout=30_000)
    assert not page.errors


def test_manager_sets_the_floor_and_reads_the_calibration_card(unsure_stack, page):
    base, project, task, _ = unsure_stack
    make_member(project, make_user("boss"), role="manager")
    login(page, base, "boss", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=60_000)
    page.goto(f"{base}/projects/{project.pk}?tab=asking")
    field = page.get_by_test_id("ask-below")
    field.wait_for(timeout=30_000)
    assert field.input_value() == "0.5"
    page.get_by_test_id("ask-calibration-empty").wait_for()
    field.fill("1.5")
    assert "between 0 and 1" in page.get_by_test_id("ask-below-error").inner_text()
    field.fill("0.4")
    page.get_by_test_id("ask-save").click()
    page.get_by_test_id("ask-saved").wait_for()
    screenshot(page, "ask-settings")
    from rollouts import asking

    assert asking.ask_floor(project.pk) == 0.4
    assert not page.errors
