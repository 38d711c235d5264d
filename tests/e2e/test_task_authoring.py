"""A manager authors tasks on the Tasks page: an any-URL task through its form (a bad start URL is refused beside
the field), a shipped one from the list, an OSWorld task as JSON (an unsupported metric is named beside the editor),
an OSWorld file with an unsupported getter is refused naming the getter, and Try it opens a supervised episode of
the new task on its session page."""
import json

import pytest

from training import deployments
from rollouts.models import Checkpoint, Episode
from projects.models import TaskSpec
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_tiny_checkpoint, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

CLOUD = {"id": "from-the-cloud", "instruction": "Fill in the sheet.",
         "config": [{"type": "googledrive", "parameters": {"settings_file": "settings.yml", "operation": ["delete"]}}],
         "evaluator": {"func": "compare_table", "result": {"type": "vm_file", "path": "/home/user/a.xlsx"},
                       "expected": {"type": "cloud_file", "path": "https://example.com/gold.xlsx"},
                       "options": {"rules": [{"type": "sheet_name"}]}}}

NOTES = {"id": "my-notes", "instruction": "Create notes.txt in your home folder.", "config": [],
         "evaluator": {"func": "check_include_exclude", "result": {"type": "vm_command_line", "command": "ls ~"},
                       "expected": {"type": "rule", "rules": {"include": ["notes.txt"]}}}}


@pytest.fixture
def authoring_project():
    project = make_project("Authoring")
    make_member(project, make_user("author"), "manager")
    # the scripted baseline first: it has no solutions for a team's own tasks, and Try it says so
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-baseline", uri="scripted:")
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test")
    return project


def test_a_manager_authors_an_any_url_task_imports_a_file_and_tries_the_task(daphne_server, page, authoring_project,
                                                                             tmp_path):
    project = authoring_project
    login(page, daphne_server, "author", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}")
    page.get_by_role("link", name="Tasks", exact=True).click()
    page.wait_for_url(f"**/projects/{project.pk}/tasks")

    page.get_by_test_id("task-new").click()
    page.get_by_test_id("editor-any_url").click()
    page.get_by_test_id("anyurl-id").fill("team-settings")
    page.get_by_test_id("anyurl-start").fill("intranet/settings")
    page.get_by_test_id("anyurl-instruction").fill("Open the settings page.")
    page.get_by_test_id("anyurl-check-url").fill("http://127.0.0.1:8000/settings")
    page.get_by_test_id("task-save").click()
    error = page.locator(".field:has([data-testid=anyurl-start]) .field-error")
    error.wait_for(timeout=10_000)
    assert "is not a web address: it must start with http:// or https://" in error.inner_text()
    screenshot(page, "tasks-bad-start-url")
    page.get_by_test_id("anyurl-start").fill("http://127.0.0.1:8000/")
    page.get_by_test_id("task-save").click()
    row = page.locator('[data-testid=task-row][data-task="team-settings"]')
    row.wait_for(timeout=10_000)
    assert "yours" in row.inner_text() and "webapp" in row.inner_text()

    page.get_by_test_id("task-new").click()  # a shipped task, chosen from the server's list with its description
    page.get_by_test_id("shipped-kind").select_option("desktop")
    page.get_by_test_id("shipped-task").select_option("desktop-mousepad-write")
    assert page.get_by_test_id("shipped-description").inner_text().startswith("Write")
    screenshot(page, "tasks-shipped-choice")
    page.get_by_test_id("task-save").click()
    shipped = page.locator('[data-testid=task-row][data-task="desktop-mousepad-write"]')
    shipped.wait_for(timeout=10_000)
    assert "shipped" in shipped.inner_text() and "15" in shipped.inner_text()  # the task's own step budget
    row.get_by_test_id("task-edit").click()  # an any-URL task opens in its form
    assert page.get_by_test_id("anyurl-start").input_value() == "http://127.0.0.1:8000/"
    page.get_by_role("button", name="Cancel").click()

    page.get_by_test_id("task-new").click()  # an OSWorld task as its JSON: the loader's message beside the editor
    page.get_by_test_id("editor-osworld").click()
    page.get_by_test_id("definition-json").fill(json.dumps({**NOTES, "evaluator": {**NOTES["evaluator"],
                                                                                  "func": "compare_pdf"}}))
    page.get_by_test_id("task-save").click()
    error = page.locator(".field:has([data-testid=definition-json]) .field-error")
    error.wait_for(timeout=10_000)
    assert "unsupported metric 'compare_pdf'" in error.inner_text()
    screenshot(page, "tasks-osworld-json-refused")
    page.get_by_test_id("definition-json").fill(json.dumps(NOTES, indent=2))
    page.get_by_test_id("task-save").click()
    page.locator('[data-testid=task-row][data-task="my-notes"]').wait_for(timeout=10_000)

    path = tmp_path / "cloud.json"
    path.write_text(json.dumps(CLOUD))
    page.get_by_test_id("task-import").click()
    page.get_by_test_id("import-files").set_input_files(str(path))
    page.get_by_test_id("import-submit").click()
    errors = page.get_by_test_id("import-errors")
    errors.wait_for(timeout=10_000)
    assert "Google Drive account, which Loupe cannot reach" in errors.inner_text() and "cloud.json" in errors.inner_text()
    screenshot(page, "tasks-import-refused")
    assert not TaskSpec.objects.filter(task_name="from-the-cloud").exists()

    row.get_by_test_id("task-try").click()
    refused = page.get_by_text("Could not start a try-out episode")
    refused.wait_for(timeout=10_000)
    assert "scripted baseline" in page.get_by_role("alert").filter(has_text="try-out").inner_text()
    assert not Episode.objects.filter(task__task_name="team-settings").exists()
    make_tiny_checkpoint(project, tmp_path / "tiny")  # a trained policy deployed: now it starts (queued; no worker here)
    row.get_by_test_id("task-try").click()
    page.wait_for_url("**/episodes/*", timeout=20_000)
    episode = Episode.objects.get(pk=int(page.url.rstrip("/").split("/")[-1]))
    assert (episode.task.task_name, episode.mode) == ("team-settings", "supervised")
    page.get_by_test_id("episode-status").wait_for(timeout=20_000)
    screenshot(page, "tasks-try-it-session")
    assert page.errors == []
