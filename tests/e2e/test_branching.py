"""A manager branches an episode from a step in the real replay page and lands in the new episode's live view;
the branch's replay says where it came from and the parent's lists it."""
import pytest

from rollouts.models import Checkpoint, Deployment, Episode, Step
from projects.models import Role
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
    note.get_by_role("link", name=f"episode {parent.pk}").click()
    page.get_by_test_id("branch-list").wait_for()
    assert f"Episode {child.pk} from step 2" in page.get_by_test_id("branch-list").inner_text()
    screenshot(page, "branch-parent")
    assert not page.errors


def test_a_branch_and_its_parent_side_by_side_with_the_pair_they_make(daphne_server, page):
    project = make_project("Comparing")
    manager = make_user("comparer")
    make_member(project, manager, Role.MANAGER)
    task = make_task(project, "click-button")
    parent = make_finished_episode(project, task, steps=[{}, {}, {}], reward=0.0)
    branch = make_finished_episode(project, task, mode="supervised", reward=1.0, steps=[
        {"thought": "step 0"},
        {"thought": "the lower button", "action": {"name": "click", "args": {"x": 40, "y": 20}}}])
    Episode.objects.filter(pk=branch.pk).update(parent=parent, branched_at=1, seed=parent.seed)
    Step.objects.filter(episode=branch, index=0).update(info={"replayed_from": {"episode": parent.pk, "step": 0}})

    login(page, daphne_server, "comparer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{branch.pk}")
    # the panels above the link (transcript, judge) grow as their data arrives: a click while they load can land
    # where the link was (CI: the navigation never came)
    page.wait_for_load_state("networkidle")
    page.get_by_test_id("compare-with-parent").click()
    page.wait_for_url(f"{daphne_server}/projects/{project.pk}/review/{branch.pk}/compare")
    pair = page.get_by_test_id("compare-pair")
    pair.wait_for()
    assert (f"At step 2 they acted differently on the same screen: the branch's (episode {branch.pk}) step is "
            "preferred over the parent's, decided by the reward.") in pair.inner_text()
    mine = page.get_by_test_id(f"compare-step-{branch.pk}-1")
    theirs = page.get_by_test_id(f"compare-step-{parent.pk}-1")
    assert mine.get_by_test_id("compare-mark").inner_text() == "chosen" and "the lower button" in mine.inner_text()
    assert theirs.get_by_test_id("compare-mark").inner_text() == "rejected"
    assert "click(x=11, y=20)" in theirs.inner_text()
    assert "the episode had ended" in page.get_by_test_id("compare-row-2").inner_text()  # the parent went on alone
    page.wait_for_function("() => { const shots = [...document.querySelectorAll('img[data-testid=replay-screenshot]')];"
                           " return shots.length === 3"
                           " && shots.every((img) => img.complete && img.naturalWidth > 0); }")
    screenshot(page, "branch-compare")

    page.goto(f"{daphne_server}/projects/{project.pk}/review/{parent.pk}")  # and from the parent, to the same view
    page.wait_for_load_state("networkidle")
    page.get_by_test_id(f"compare-branch-{branch.pk}").click()
    page.get_by_test_id("compare-pair").wait_for()
    assert page.url.endswith(f"/review/{branch.pk}/compare")
    assert not page.errors
