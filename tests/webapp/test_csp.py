"""Every response carries a Content-Security-Policy (webapp/middleware.py); the built frontend needs nothing it
forbids. tests/e2e/test_csp.py checks the pages in Chromium under it."""
import re
from html.parser import HTMLParser

import pytest
from django.conf import settings
from django.test import Client

from tests.factories import make_user

pytestmark = pytest.mark.django_db


def policy(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: " ".join(part.split()[1:]) for part in header.split(";") if part.strip()}


def assert_strict(directives: dict[str, str], host: str = "testserver") -> None:
    assert directives["default-src"] == "'self'"
    assert directives["script-src"] == "'self'"  # no 'unsafe-inline', no 'unsafe-eval'
    assert directives["style-src"] == "'self'"
    assert directives["img-src"] == "'self' data: blob:"
    assert directives["media-src"] == "'self' blob:"
    assert directives["connect-src"] == f"'self' ws://{host} wss://{host}"
    assert directives["object-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'self'" and directives["form-action"] == "'self'"


def test_an_api_response_carries_the_policy():
    response = Client().get("/api/v1/auth/session")
    assert response["Content-Type"].startswith("application/json")
    assert_strict(policy(response))


def test_the_spa_index_carries_the_policy_with_the_requests_websocket_origin():
    response = Client(HTTP_HOST="localhost:8000").get("/projects/1/episodes")
    assert response.status_code in (200, 503)  # 503: the frontend is not built in this checkout
    assert_strict(policy(response), host="localhost:8000")


def test_the_admin_and_an_error_carry_it_too():
    assert_strict(policy(Client().get("/admin/login/")))
    assert_strict(policy(Client().get("/api/v1/no/such/thing")))


def test_a_foreign_host_is_refused_and_the_refusal_still_carries_the_policy_without_websocket_origins():
    response = Client(HTTP_HOST="evil.example").get("/login")
    assert response.status_code == 400
    assert policy(response)["connect-src"] == "'self'"
    assert "evil.example" not in response["Content-Security-Policy"]


class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[dict] = []
        self.inline_styles = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script":
            self.scripts.append(attrs)
        if tag == "style" or "style" in attrs:
            self.inline_styles += 1
        if any(name.startswith("on") for name in attrs):
            self.scripts.append({"inline handler": True})


@pytest.mark.skipif(not (settings.FRONTEND_DIST / "index.html").exists(), reason="the frontend is not built")
def test_the_built_frontend_has_no_inline_script_or_style_the_policy_would_block():
    html = (settings.FRONTEND_DIST / "index.html").read_text()
    parser = _Scripts()
    parser.feed(html)
    assert parser.scripts and all(s.get("src", "").startswith("/assets/") for s in parser.scripts), parser.scripts
    assert parser.inline_styles == 0
    # its files are served with the policy too
    asset = re.search(r'src="(/assets/[^"]+\.js)"', html).group(1)
    response = Client().get(asset)
    assert response.status_code == 200
    assert_strict(policy(response))


def test_a_logged_in_page_and_a_write_carry_the_policy():
    user = make_user("csp")
    client = Client()
    client.force_login(user)
    assert_strict(policy(client.get("/api/v1/projects/")))
    assert_strict(policy(client.post("/api/v1/auth/token", {}, content_type="application/json")))
