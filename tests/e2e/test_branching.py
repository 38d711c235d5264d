"""A manager branches an episode from a step in the real replay page and lands in the new episode's live view;
the branch's replay says where it came from and the parent's lists it."""
import pytest

from flywheel.models import Checkpoint, Deployment, Episode, Role
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_branch_here_opens_the_new_episode_and_links_both_ways(daphne_server, page):
    project = make_project("Branching")
    manager = make_user("brancher")
    make_member(project, manager, Role.MANAGER)
    task = make_task(project, "click-button")
    checkpoint = Checkpoint.objects.create(project=project, name="deployed", uri="/nowhere")
    Deployment.objects.create(project=project, checkpoint=checkpoint, active=True)
    parent = make_finished_episode(project, task, steps=[{}, {}, {}])

    login(page, daphne_server, "brancher", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{parent.pk}")
    page.get_by_test_id("replay-current").wait_for()
    page.keyboard.press("ArrowRight")  # to the second step (index 1): the page counts steps from 1
    button = page.get_by_test_id("branch-here")
    page.wait_for_function("() => document.querySelector('[data-testid=branch-here]').textContent.includes('step 2')")
    page.get_by_test_id("branch-mode").select_option("supervised")
    button.click()
    page.wait_for_url(f"{daphne_server}/episodes/*", timeout=20_000)
    child = Episode.objects.get(parent=parent)
    assert page.url.rstrip("/").endswith(f"/episodes/{child.pk}")
    assert (child.branched_at, child.mode, child.seed, child.controller_id) == (1, "supervised", parent.seed, manager.pk)

    page.goto(f"{daphne_server}/projects/{project.pk}/review/{child.pk}")
    note = page.get_by_test_id("branch-of")
    note.wait_for()
    assert f"Branched from episode {parent.pk} at step 2. Its first step repeats that episode's" in note.inner_text()
    note.get_by_role("link").click()
    page.get_by_test_id("branch-list").wait_for()
    assert f"Episode {child.pk} from step 2" in page.get_by_test_id("branch-list").inner_text()
    screenshot(page, "branch-parent")
    assert not page.errors
