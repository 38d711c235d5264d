"""A data manager reads the judge in the real Review page: its verdict and reason beside the person's review, a
judgement asked for with the button and run by a real worker, and the calibration against the reviewers with the
numbers worked out here by hand."""
import pytest

from annotation.reviews import review_submit
from annotation import judge
from rollouts.models import Judgement
from projects.models import Role
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SUCCESS = "Verdict: success\nReason: the confirmation dialog shows the order number."
FAILURE = "Verdict: failure\nReason: the search box is still empty."


def scripted(*answers: str) -> dict:
    return {"backend": "scripted", "answers": list(answers), "samples": len(answers)}


@pytest.fixture
def judged_project():
    project = make_project("Judging")
    manager = make_user("judge-manager")
    make_member(project, manager, Role.MANAGER)
    task_a, task_b = make_task(project, "click-button"), make_task(project, "search-engine")
    # (task, judge, reviewers): click-button SS SS SF FF, search-engine FS FF
    cases = [(task_a, SUCCESS, "accept"), (task_a, SUCCESS, "accept"), (task_a, SUCCESS, "reject"),
             (task_a, FAILURE, "reject"), (task_b, FAILURE, "accept"), (task_b, FAILURE, "reject")]
    episodes = []
    for task, answer, review in cases:
        episode = make_finished_episode(project, task, steps=[{}, {}], reward=None)
        judge.judge_episode(episode_id=episode.pk, config=scripted(answer))
        review_submit(episode=episode, reviewer=manager, verdict=review)
        episodes.append(episode)
    fresh = make_finished_episode(project, task_a, steps=[{}], reward=None)
    # the judge the button asks: 2 of 3 samples say success
    judge.judge_settings_set(project=project, actor=manager, changes=scripted(SUCCESS, FAILURE, SUCCESS))
    return {"project": project, "episodes": episodes, "fresh": fresh}


def test_manager_sees_the_judges_verdict_asks_it_again_and_reads_its_calibration(daphne_server, celery_worker, page,
                                                                               judged_project):
    project, voted = judged_project["project"], judged_project["episodes"][2]
    login(page, daphne_server, "judge-manager", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)

    # beside the person's review (accepted by nobody: rejected), the judge said success and why
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{voted.pk}")
    page.get_by_test_id("judge-latest").wait_for()
    assert page.get_by_test_id("judge-verdict").inner_text() == "Success"
    assert "the confirmation dialog shows the order number" in page.get_by_test_id("judge-reason").inner_text()
    assert "rejected" in page.get_by_test_id("review-status").inner_text().lower()
    screenshot(page, "judge-verdict")

    # an unjudged episode: the button queues the judge on the worker, the panel waits for its answer
    fresh = judged_project["fresh"]
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{fresh.pk}")
    page.get_by_test_id("judge-none").wait_for()
    page.get_by_test_id("judge-run").click()
    page.get_by_test_id("judge-latest").wait_for(timeout=30_000)
    assert page.get_by_test_id("judge-verdict").inner_text() == "Success"
    assert page.get_by_test_id("judge-confidence").inner_text() == "2 of 3 samples agreed (67 %)"
    stored = Judgement.objects.get(episode=fresh)
    assert (stored.verdict, stored.confidence, stored.created_by.username) == ("success", 0.67, "judge-manager")
    screenshot(page, "judge-asked")

    # calibration: 6 pairs, agree 4 (SS SS FF FF); judge S=3 F=3, reviewers S=3 F=3: pe = 1/2, kappa = (4/6-1/2)/(1/2)
    # click-button: 4 pairs, agree 3; judge S=3 F=1, reviewers S=2 F=2: pe = 1/2, kappa = 0.5
    # search-engine: 2 pairs, agree 1; judge F=2, reviewers S=1 F=1: pe = 1/2, kappa = 0
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("calibration-toggle").click()
    page.get_by_test_id("calibration-summary").wait_for()
    assert page.get_by_test_id("calibration-episodes").inner_text() == "6"
    assert page.get_by_test_id("calibration-agreement").inner_text() == f"{round(100 * 4 / 6)} %"
    assert page.get_by_test_id("calibration-kappa").inner_text() == f"{(4 / 6 - 1 / 2) / (1 / 2):.2f}"
    assert "fair agreement beyond chance" in page.get_by_test_id("calibration-summary").inner_text()
    cells = {name: page.get_by_test_id(f"confusion-{name}").inner_text()
             for name in ("success-accept", "success-reject", "failure-accept", "failure-reject")}
    assert cells == {"success-accept": "2", "success-reject": "1", "failure-accept": "1", "failure-reject": "2"}
    click = page.locator('[data-testid="calibration-task"][data-task="click-button"]')
    assert click.get_by_test_id("calibration-task-agreement").inner_text() == "75 %"
    assert click.get_by_test_id("calibration-task-kappa").inner_text() == "0.50"
    search = page.locator('[data-testid="calibration-task"][data-task="search-engine"]')
    assert search.get_by_test_id("calibration-task-kappa").inner_text() == "0.00"
    screenshot(page, "judge-calibration")
    assert page.errors == []


def test_manager_sets_the_judge_on_the_review_page_and_is_told_what_is_wrong(daphne_server, page):
    project = make_project("Judge settings")
    manager = make_user("judge-setter")
    make_member(project, manager, Role.MANAGER)
    login(page, daphne_server, "judge-setter", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("judge-settings-toggle").click()
    page.get_by_test_id("judge-samples").fill("40")
    assert page.get_by_test_id("judge-samples-error").inner_text() == "Use a whole number from 1 to 15."
    assert page.get_by_test_id("judge-save").is_disabled()
    page.get_by_test_id("judge-samples").fill("3")
    page.get_by_test_id("judge-backend").select_option("openai")
    assert "needs the name of the model" in page.get_by_test_id("judge-model-error").inner_text()
    page.get_by_test_id("judge-model").fill("qwen2.5-vl-7b")
    page.get_by_test_id("judge-screenshots").fill("5")
    page.get_by_test_id("judge-enabled").check()
    screenshot(page, "judge-settings")
    page.get_by_test_id("judge-save").click()
    page.get_by_test_id("judge-saved").wait_for()
    project.refresh_from_db()
    saved = judge.judge_settings_of(project)
    assert (saved["enabled"], saved["backend"], saved["samples"], saved["screenshots"], saved["model"]) == (
        True, "openai", 3, 5, "qwen2.5-vl-7b")
    assert not page.errors
