"""Each demo user logs in through the real page and sees the projects their role allows."""
import pytest

from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD
from webapp.demo import seed_demo

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

EXPECTED = {"admin": {"Demo project", "Private project"}, "manager": {"Demo project"}, "annotator": {"Demo project"}}


@pytest.mark.parametrize("username", ["admin", "manager", "annotator"])
def test_demo_user_logs_in_and_sees_their_projects(daphne_server, page, username):
    seed_demo(PASSWORD)
    login(page, daphne_server, username, PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    names = {card.inner_text().splitlines()[0] for card in page.get_by_test_id("project-card").all()}
    screenshot(page, f"projects-{username}")
    assert {n for n in EXPECTED[username]} <= {line for card in page.get_by_test_id("project-card").all()
                                               for line in card.inner_text().splitlines()}
    assert len(names) == len(EXPECTED[username])
    assert page.errors == []


def test_wrong_password_shows_the_servers_message(daphne_server, page):
    seed_demo(PASSWORD)
    login(page, daphne_server, "manager", "wrong-password")
    page.get_by_text("Wrong username or password.").wait_for(timeout=10_000)
    screenshot(page, "login-error")
    assert "/login" in page.url


def test_logout_returns_to_the_login_page(daphne_server, page):
    seed_demo(PASSWORD)
    login(page, daphne_server, "annotator", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.get_by_test_id("logout").click()
    page.get_by_test_id("login-username").wait_for(timeout=10_000)
    page.goto(daphne_server + "/")
    page.get_by_test_id("login-username").wait_for(timeout=10_000)


def test_a_project_you_are_not_in_says_so_and_leads_back_without_retry(daphne_server, page):
    from projects.models import Project

    seed_demo(PASSWORD)
    private = Project.objects.get(name="Private project")
    login(page, daphne_server, "annotator", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{private.pk}/episodes")
    banner = page.get_by_test_id("no-access")
    banner.wait_for(timeout=20_000)
    screenshot(page, "project-not-a-member")
    assert "You are not a member of this project" in banner.inner_text()
    assert page.get_by_role("button", name="Retry").count() == 0
    assert "Something went wrong" not in page.inner_text("body")
    page.get_by_test_id("no-access-home").click()
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    assert page.errors == []
