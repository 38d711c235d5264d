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
