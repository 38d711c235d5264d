"""Forms and layout as a new annotation team meets them, in the real page (daphne + Chromium): nothing typed is cut
(over the limit it is refused at the field, with a counter), task ids are slugs, every message shows beside the
control that caused it (Try it at the bottom of the page included) and once, labels are tied to their inputs, and
the review table, the Tasks table and a long unbroken reason or thought fit the window at 1280 and 1440 px."""
import pytest

from training import deployments
from rollouts.models import Checkpoint, Episode
from snapshots.models import DatasetSnapshot
from projects.models import Role, TaskSpec
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

WIDTHS = (1280, 1440)
# What a person may type with no space in it: a pasted address, a path, a word of a script without spaces
UNBROKEN = "https://intranet.example.com/settings/notifications/" + "x" * 400


def overflow(page, selector: str) -> dict:
    """How far the element and its content reach past its own box and past the window, in px (0: they fit)."""
    return page.eval_on_selector(selector, """el => {
        const box = el.getBoundingClientRect();
        let right = box.right;
        for (const child of el.querySelectorAll('*')) right = Math.max(right, child.getBoundingClientRect().right);
        const root = document.documentElement;
        return {scroll: el.scrollWidth - el.clientWidth, window: Math.max(0, right - root.clientWidth),
                page: root.scrollWidth - root.clientWidth};
    }""")


@pytest.fixture
def layout_project():
    project = make_project("Layout")
    manager, annotator = make_user("lead-reviewer"), make_user("annotator-with-a-long-name")
    make_member(project, manager, Role.MANAGER)
    make_member(project, annotator, Role.ANNOTATOR)
    task = make_task(project, "click-checkboxes")
    checkpoint = Checkpoint.objects.create(project=project, name="cycle-12-sft-candidate-after-replay", uri="scripted:")
    for _ in range(3):
        make_finished_episode(project, task, steps=[{}, {}], mode="supervised", reward=0.0, created_by=annotator,
                              checkpoint=checkpoint)
    rejected = make_finished_episode(project, task, mode="supervised", created_by=annotator, checkpoint=checkpoint,
                                     steps=[{"rejections": [{"action": {"name": "click", "args": {"x": 1, "y": 1}},
                                                             "thought": "the logo", "reason": UNBROKEN}],
                                             "thought": UNBROKEN, "human_thought": UNBROKEN}])
    return {"project": project, "rejected": rejected}


@pytest.mark.parametrize("width", WIDTHS)
def test_the_review_table_and_a_long_unbroken_reason_and_thought_fit_the_window(daphne_server, page, layout_project,
                                                                              width):
    project = layout_project["project"]
    page.set_viewport_size({"width": width, "height": 900})
    login(page, daphne_server, "lead-reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("review-row").first.wait_for()
    screenshot(page, f"forms-review-table-{width}")
    table = overflow(page, "[data-testid=review-table]")
    wrap = overflow(page, ".table-wrap:has([data-testid=review-table])")
    assert wrap["scroll"] == 0 and table["window"] == 0 and wrap["page"] == 0, (table, wrap)

    page.goto(f"{daphne_server}/projects/{project.pk}/review/{layout_project['rejected'].pk}")
    rejection = page.get_by_test_id("step-rejection").first
    rejection.wait_for()
    assert UNBROKEN in rejection.inner_text()
    screenshot(page, f"forms-long-reason-{width}")
    for card in ("[data-testid=step-rejections]", "[data-testid=replay-current]"):  # the reason, the thoughts
        fits = overflow(page, card)
        assert fits["scroll"] == 0 and fits["window"] == 0 and fits["page"] == 0, (card, fits)
    assert page.errors == []


def below(page, upper, lower) -> float:
    """How far ``lower``'s top is under ``upper``'s bottom, in px (negative: above it)."""
    return lower.bounding_box()["y"] - (upper.bounding_box()["y"] + upper.bounding_box()["height"])


@pytest.fixture
def tasks_project():
    project = make_project("Forms")
    make_member(project, make_user("form-lead"), Role.MANAGER)
    # the scripted baseline is deployed: it has no steps for a team's own task, so Try it is refused
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test")
    for name in ("click-button", "click-dialog", "click-link", "click-option", "click-tab", "enter-text"):
        make_task(project, name)  # enough rows that a new task's Try it sits far below the page's top
    make_task(project, "click-test", instruction_template="Press-the-button-" * 235)  # 3,995 characters, no space
    return project


@pytest.mark.parametrize("width", WIDTHS)
def test_a_manager_meets_the_tasks_page_limits_slugs_and_try_it_beside_its_button(daphne_server, page, tasks_project,
                                                                                  width):
    project = tasks_project
    page.set_viewport_size({"width": width, "height": 900})
    login(page, daphne_server, "form-lead", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/tasks")
    table = page.get_by_test_id("task-table")
    table.wait_for()
    wrap = overflow(page, ".table-wrap:has([data-testid=task-table])")
    assert wrap["scroll"] == 0 and wrap["window"] == 0 and wrap["page"] == 0, wrap  # a long instruction is clamped
    row = page.locator('[data-testid=task-row][data-task="click-test"]')
    assert row.get_by_test_id("task-try").bounding_box()["x"] + 60 < width  # its buttons stay on screen
    screenshot(page, f"forms-tasks-table-{width}")

    page.get_by_test_id("task-new").click()
    page.get_by_test_id("editor-any_url").click()
    start = page.get_by_test_id("anyurl-start")
    assert start.input_value() == f"{daphne_server}/"  # this server's own address, whatever its port
    task_id = page.get_by_test_id("anyurl-id")
    id_error = page.locator(".field:has([data-testid=anyurl-id]) .field-error")
    for bad in ("<script>alert(1)</script>", "новая задача <script>"):
        task_id.fill(bad)
        assert "may hold only lowercase letters a-z, digits, '-' and '_'" in id_error.inner_text()
    assert page.get_by_label("Task id", exact=True).get_attribute("aria-invalid") == "true"
    instruction = page.get_by_test_id("anyurl-instruction")
    huge = "Turn it off. " * 15_385  # 200,005 characters, pasted at once
    instruction.fill(huge)
    assert len(instruction.input_value()) == len(huge)  # kept whole in the field
    counter = page.locator(".field:has([data-testid=anyurl-instruction]) [data-testid=limit-task_instruction]")
    assert counter.inner_text().startswith("200,004 / 4,000 characters")  # as it is sent: trimmed
    page.get_by_test_id("anyurl-check-url").fill(f"{daphne_server}/done")
    assert page.get_by_test_id("task-save").is_disabled()
    assert page.get_by_test_id("task-fix-first").inner_text() == "2 fields above say what to fix first."
    screenshot(page, f"forms-task-refused-at-the-field-{width}")
    assert not TaskSpec.objects.filter(project=project, definition__isnull=False).exists()
    task_id.fill("team-settings")
    assert id_error.count() == 0  # fixed: the message goes at once
    instruction.fill("Turn notifications off.")
    page.get_by_test_id("task-save").click()
    page.locator('[data-testid=task-row][data-task="team-settings"]').wait_for(timeout=10_000)

    row = page.locator('[data-testid=task-row][data-task="team-settings"]')
    row.get_by_test_id("task-try").click()
    error = page.locator('[data-testid=task-row-error][data-task="team-settings"]')
    error.wait_for(timeout=10_000)
    assert "scripted baseline" in error.inner_text()
    button = row.get_by_test_id("task-try")
    assert 0 <= below(page, button, error) < 40  # right under the button that was clicked
    error.scroll_into_view_if_needed()
    assert button.is_visible() and error.is_visible()
    screenshot(page, f"forms-try-it-refused-{width}")
    assert not Episode.objects.filter(project=project).exists()
    assert page.errors == []


def test_names_and_settings_are_refused_at_their_fields_and_labels_name_their_inputs(daphne_server, page,
                                                                                     layout_project):
    project = layout_project["project"]
    login(page, daphne_server, "lead-reviewer", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)

    page.goto(f"{daphne_server}/projects/{project.pk}/datasets")
    name = page.get_by_test_id("snapshot-name")
    pasted = "n" * 5000
    name.fill(pasted)
    assert name.input_value() == pasted  # no maxLength cutting the paste to 200
    assert page.get_by_test_id("limit-snapshot_name").inner_text() == ("5,000 / 200 characters: 4,800 too many, "
                                                                       "shorten it to send")
    assert page.get_by_test_id("snapshot-create").is_disabled()
    screenshot(page, "forms-snapshot-name-refused")
    assert not DatasetSnapshot.objects.exists()

    page.goto(f"{daphne_server}/projects/{project.pk}/review")
    page.get_by_test_id("judge-settings-toggle").click()
    for label, test_id in (("Judge", "judge-backend"), ("Votes (k)", "judge-samples"),
                           ("Last screenshots", "judge-screenshots"), ("Temperature", "judge-temperature")):
        assert page.get_by_label(label, exact=True).get_attribute("data-testid") == test_id

    page.goto(f"{daphne_server}/projects/{project.pk}/cycles")
    page.get_by_test_id("cycle-settings").wait_for()
    page.locator(".cycle-serving summary").click()
    page.get_by_test_id("setting-backend").select_option("openai")
    page.get_by_test_id("cycle-settings-save").click()  # openai with a LoRA export needs the served base checkpoint
    problem = page.get_by_test_id("problem-base_checkpoint")
    problem.wait_for(timeout=10_000)
    message = problem.inner_text()
    assert message.startswith("The openai backend with LoRA export needs the checkpoint the server was started with")
    assert page.locator("body").inner_text().count(message) == 1  # said once, beside its field
    assert 0 <= below(page, page.get_by_test_id("setting-base-checkpoint"), problem) < 40
    banner = page.get_by_test_id("error-banner").filter(has_text="The settings were not saved")
    assert "the message beside the field says what to change" in banner.inner_text()
    screenshot(page, "forms-cycle-settings-beside")
    page.get_by_test_id("setting-base-checkpoint").fill("1")
    assert problem.count() == 0 and banner.count() == 0
    assert page.errors == []
