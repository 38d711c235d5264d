"""The project's Personal data tab in the real page (issue 40): a manager sees what redaction finds in recent
episodes, by kind with examples, adds a name to the word list and sees it counted, marks a wrong hit and a miss and
sees precision and recall follow; switching redaction off, or keeping originals, is refused to them (only an admin,
with a reason)."""
import pytest

from core.models import AuditEntry
from projects.models import Project, Role
from rollouts.models import Step
from tests.core.pii_set import VALUES
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_manager_sees_the_hits_by_kind_and_adds_a_name_to_the_word_list(daphne_server, page):
    project = make_project("Private data")
    manager = make_user("privacy-lead")
    make_member(project, manager, Role.MANAGER)
    episode = make_finished_episode(project, make_task(project), steps=[{}])
    Step.objects.filter(episode=episode).update(
        elements=[{"role": "text", "text": VALUES["email"][1], "x": 5, "y": 5, "width": 9, "height": 9},
                  {"role": "text", "text": VALUES["name"][1], "x": 5, "y": 25, "width": 9, "height": 9}],
        human_thought=VALUES["phone"][1])

    login(page, daphne_server, "privacy-lead", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=30_000)
    page.goto(f"{daphne_server}/projects/{project.pk}?tab=privacy")
    section = page.get_by_test_id("privacy-section")
    section.wait_for(timeout=30_000)
    assert page.get_by_test_id("redaction-state").inner_text() == "redacted"
    email = page.locator('[data-testid="redaction-count"][data-kind="email"]')
    assert email.get_by_test_id("redaction-hits").inner_text() == "1"
    assert VALUES["email"][0] in email.get_by_test_id("redaction-example").inner_text()
    assert "1 in spoken words" in page.locator('[data-testid="redaction-count"][data-kind="phone"]').inner_text()
    assert page.locator('[data-testid="redaction-count"][data-kind="name"]').count() == 0

    page.get_by_test_id("redaction-words").fill(VALUES["name"][0])
    page.get_by_test_id("redaction-save").click()
    page.get_by_test_id("redaction-saved").wait_for(timeout=15_000)
    page.locator('[data-testid="redaction-count"][data-kind="name"]').wait_for(timeout=15_000)
    screenshot(page, "privacy-tab")
    assert Project.objects.get(pk=project.pk).settings["redaction"]["words"] == [VALUES["name"][0]]
    assert AuditEntry.objects.filter(action="redaction.policy_set", actor=manager).count() == 1

    phone = page.locator('[data-testid="redaction-count"][data-kind="phone"]')
    phone.get_by_test_id("redaction-wrong-hit").click()  # the reviewer says the number is no personal data
    page.wait_for_function("() => document.querySelector('[data-kind=phone] [data-testid=redaction-precision]')"
                           ".textContent === '0 %'", timeout=15_000)
    page.get_by_test_id("redaction-missed-text").fill("jane at example dot org")
    page.get_by_test_id("redaction-missed-kind").select_option("email")
    page.get_by_test_id("redaction-missed-save").click()  # and an address spelled out was missed
    page.wait_for_function("() => document.querySelector('[data-kind=email] [data-testid=redaction-recall]')"
                           ".textContent === '50 %'", timeout=15_000)
    screenshot(page, "privacy-marks")

    page.get_by_test_id("redaction-enabled").uncheck()  # a manager may not switch it off
    assert page.get_by_test_id("redaction-save").is_disabled()
    assert page.get_by_text("Only an admin of this project can switch redaction off.").is_visible()
    page.get_by_test_id("redaction-enabled").check()
    page.get_by_test_id("redaction-keep-originals").check()  # nor keep what redaction hides
    assert page.get_by_test_id("redaction-save").is_disabled()
    assert page.get_by_text("Only an admin of this project can keep originals.").is_visible()
    screenshot(page, "privacy-keep-originals")
    assert page.errors == []
