"""A manager runs the flywheel from the Cycles page against a real daphne and a real worker (a tiny, fast
recipe): settings, "Run a cycle now", the live training, the rejection with its numbers, approving the
candidate by hand, and rolling back to the earlier deployment. Annotators see the page but no controls."""
import pytest
from playwright.sync_api import expect

from snapshots import buckets
from rollouts.models import Deployment
from projects.models import Role
from tests.e2e.conftest import login, screenshot
from tests.factories import (PASSWORD, make_finished_episode, make_member, make_project, make_task, make_tiny_checkpoint,
                             make_user)
from tests.stack import start_worker, stack_env, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture(scope="module")
def cycle_worker(module_stack, tmp_path_factory):
    stack, path = module_stack
    return start_worker(stack, path, stack_env(LOUPE_CHECKPOINT_DIR=tmp_path_factory.mktemp("checkpoints")),
                        queues="default,train", concurrency=2)


@pytest.fixture
def cycle_project(tmp_path):
    project = make_project("Flywheel")
    manager, annotator = make_user("flywheeler"), make_user("watcher")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    train = make_task(project, "click-test", seed_start=0, seed_end=999, max_steps=2)
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=1)
    make_tiny_checkpoint(project, tmp_path / "untrained")
    buckets.routing_set(project=project, actor=manager, reward_threshold=0.5)
    for _ in range(3):  # rows that teach a fixed corner click: the candidate cannot beat the untrained policy
        make_finished_episode(project, train, steps=[{}], mode="supervised", reward=1.0)
    return {"project": project, "manager": manager, "annotator": annotator}


def test_manager_runs_a_cycle_approves_the_rejected_candidate_and_rolls_back(daphne_server, cycle_worker, page,
                                                                           cycle_project):
    project = cycle_project["project"]
    login(page, daphne_server, "flywheeler", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}")
    page.get_by_role("link", name="Cycles").click()
    page.get_by_test_id("cycles-empty").wait_for()
    expect(page.get_by_test_id("cycles-active-checkpoint")).to_have_text("untrained")  # once deployments load

    # a tiny recipe, two eval seeds, and a schedule
    page.get_by_test_id("setting-min-rows").fill("1")
    page.get_by_test_id("setting-eval-seeds").fill("2")
    page.get_by_test_id("stage-sft-steps").fill("60")
    page.get_by_test_id("setting-cadence").fill("720")
    page.get_by_test_id("cycle-settings-save").click()
    page.get_by_test_id("cycle-settings-saved").wait_for()
    assert "Schedule: every 720 minutes" in page.get_by_test_id("cycle-gate-now").inner_text()
    screenshot(page, "cycles-settings")

    page.get_by_test_id("run-cycle").click()
    card = page.get_by_test_id("cycle").first
    card.wait_for()
    page.wait_for_selector("[data-testid=step-train][data-status=current]", timeout=60_000)
    page.get_by_test_id("run-progress").wait_for(timeout=60_000)
    page.wait_for_selector("[data-testid=cycle] path[data-series=sft]", timeout=120_000)  # the live loss curve
    assert page.get_by_test_id("run-cycle").is_disabled()  # one cycle at a time
    screenshot(page, "cycles-training")

    page.wait_for_selector("[data-testid=cycle][data-state=rejected]", timeout=300_000)
    why = page.get_by_test_id("cycle-decision").first.inner_text()
    assert "Why it was rejected" in why and "rejected: c1 0.0% vs deployed untrained 0.0%" in why, why
    assert page.get_by_test_id("evaluation-row").count() == 2
    expect(page.get_by_test_id("task-change-click-test")).to_have_text("±0.0")  # per task: candidate − deployed
    assert page.locator(".success-card path[data-series]").count() == 2
    screenshot(page, "cycles-rejected")

    # Deploying a candidate the gate rejected is a deliberate act: a secondary button, then a confirmation
    # with the numbers and the gate's reason, Cancel focused (Enter does not deploy it).
    approve = page.get_by_test_id("approve-candidate")
    assert "primary" not in (approve.get_attribute("class") or "")
    approve.click()
    confirm = page.get_by_test_id("approve-anyway-confirm")
    confirm.wait_for()
    assert "0.0%" in page.get_by_test_id("approve-anyway-numbers").inner_text()
    assert page.get_by_test_id("approve-anyway-reason").inner_text().strip()
    page.wait_for_function("() => document.activeElement?.dataset.testid === 'approve-anyway-cancel'")
    screenshot(page, "cycles-approve-anyway")
    page.keyboard.press("Enter")  # the focused Cancel: nothing deployed
    confirm.wait_for(state="detached")
    assert Deployment.objects.get(project=project, active=True).checkpoint.name != "c1"
    approve.click()
    page.get_by_test_id("approve-anyway-deploy").click()
    page.wait_for_selector("[data-testid=cycle][data-state=deployed]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=cycles-active-checkpoint]').textContent === 'c1'")
    assert Deployment.objects.get(project=project, active=True).checkpoint.name == "c1"

    rows = page.get_by_test_id("deployment-row")
    earlier = rows.filter(has_text="untrained")
    earlier.get_by_test_id("rollback").click()
    earlier.get_by_test_id("rollback-confirm").click()
    page.get_by_test_id("rollback-done").wait_for()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=cycles-active-checkpoint]').textContent === 'untrained'")
    assert Deployment.objects.get(project=project, active=True).checkpoint.name == "untrained"
    screenshot(page, "cycles-rolled-back")
    assert not page.errors, page.errors
    worker_quiet()


def test_annotator_sees_cycles_but_no_controls(daphne_server, page, cycle_project):
    login(page, daphne_server, "watcher", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{cycle_project['project'].pk}/cycles")
    page.get_by_test_id("cycle-settings").wait_for()
    assert page.get_by_test_id("run-cycle").count() == 0
    assert page.get_by_test_id("setting-margin").is_disabled()
    assert "Only the project's managers" in page.get_by_test_id("cycle-settings").inner_text()
    screenshot(page, "cycles-annotator")
