"""An annotator steers a supervised episode through the real page, with a real rollout worker.

The policy is the `scripted` backend (the task's solver), so each proposal is the right click and
the test knows what the model will do: the annotator edits the first proposal to a wrong spot,
rejects the next one, takes over and clicks an empty corner on the screenshot, hands back, and
approves the model's click, which solves the task."""
import pytest

from annotation.models import Intervention
from training import deployments
from rollouts.models import Checkpoint, Episode, Step
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

CORNER = "click(x=3, y=207)"


@pytest.fixture
def scripted_project(tmp_path):
    from trainer.model import save_tiny_untrained

    project = make_project("Steering")
    user = make_user("steerer")
    make_member(project, user)
    task = make_task(project, "click-button", max_steps=10)
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-solver", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    return project, task


def wait_proposal(page, index: int):
    page.locator(f'[data-testid="proposal"][data-index="{index}"]').wait_for(timeout=60_000)


def test_annotator_steers_a_supervised_episode_in_the_browser(daphne_server, celery_worker, page, scripted_project):
    project, task = scripted_project
    login(page, daphne_server, "steerer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/episodes")
    page.get_by_test_id("start-seed").fill("3")
    page.get_by_test_id("start-submit").click()
    page.wait_for_url("**/episodes/*", timeout=30_000)
    episode_id = int(page.url.rstrip("/").split("/")[-1])

    wait_proposal(page, 0)
    screenshot(page, "session-proposal")
    page.get_by_test_id("cmd-edit").click()
    page.get_by_test_id("edit-action").fill("click(x=3, y=")
    page.get_by_test_id("edit-error").wait_for(timeout=5_000)  # the grammar is checked as they type
    page.get_by_test_id("edit-action").fill(CORNER)
    page.get_by_test_id("edit-thought").fill("Trying the corner first.")
    page.get_by_test_id("edit-submit").click()

    wait_proposal(page, 1)
    page.get_by_test_id("cmd-reject").click()
    page.get_by_test_id("reject-reason").fill("not that one")
    page.get_by_test_id("reject-submit").click()
    wait_for(lambda: Intervention.objects.filter(episode_id=episode_id, kind="reject").exists(), 60, what="reject")
    # The proposal after a reject says so; the scripted solver cannot change its mind, and the page says that too.
    again = page.locator('[data-testid="proposal"][data-index="1"][data-attempt="2"]')
    again.wait_for(timeout=60_000)
    assert "Proposal 2 for this step, after your reject." in again.get_by_test_id("proposal-attempt").inner_text()
    assert "not that one" in again.get_by_test_id("proposal-rejected").inner_text()
    again.get_by_test_id("proposal-repeated").wait_for(timeout=5_000)
    screenshot(page, "session-after-reject")

    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("cmd-handback").wait_for(timeout=30_000)
    image = page.get_by_test_id("episode-screenshot")
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    image.click(position={"x": box["width"] * 4 / 160, "y": box["height"] * 206 / 210})
    screenshot(page, "session-takeover-click")
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(), 60, what="the human step")
    screenshot(page, "session-takeover")
    page.get_by_test_id("cmd-handback").click()

    wait_proposal(page, 2)
    page.get_by_test_id("cmd-approve").click()
    wait_for(lambda: Episode.objects.get(pk=episode_id).status == "finished", 60, what="the episode to end")
    page.get_by_test_id("episode-status").filter(has_text="finished").wait_for(timeout=30_000)
    screenshot(page, "session-finished")

    episode = Episode.objects.get(pk=episode_id)
    assert episode.env_reward and episode.env_reward > 0.9
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.actor for s in steps] == ["edited", "human", "model"]
    assert steps[0].action_text == CORNER and steps[0].proposal["action"]["name"] == "click"
    assert steps[0].thought == "Trying the corner first."
    assert steps[1].action["name"] == "click" and steps[1].action["args"]["y"] >= 200
    assert steps[1].proposal is not None  # the model's proposal is kept beside the person's action
    kinds = list(Intervention.objects.filter(episode=episode).values_list("kind", "step_index"))
    assert kinds == [("edit", 0), ("reject", 1), ("takeover", 1), ("act", 1), ("handback", 2), ("approve", 2)]
    assert page.errors == []
