"""The production settings (LOUPE_PRODUCTION=1): `manage.py check --deploy` is clean, and a real daphne run with
them sends the security headers, secure cookies, refuses session writes without CSRF, redirects plain HTTP, and
serves no stored file except through a permission-checked view."""
from __future__ import annotations

import http.cookiejar
import json
import secrets
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.factories import PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user
from tests.reliability.live import start_daphne_on
from tests.stack import ROOT, ProcessStack, free_port, stack_env

PRODUCTION = {"LOUPE_PRODUCTION": "1", "LOUPE_SECRET_KEY": secrets.token_urlsafe(50),
              "LOUPE_ALLOWED_HOSTS": "127.0.0.1,loupe.example.com"}


def test_check_deploy_is_clean_with_the_production_settings():
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            env=stack_env(**PRODUCTION), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "no issues" in result.stdout, result.stdout + result.stderr[-3000:]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.django_db(transaction=True)
def test_a_production_server_sends_secure_headers_and_cookies_and_guards_session_writes(tmp_path):
    project = make_project()
    user = make_user("prod")
    make_member(project, user, "manager")
    episode = make_finished_episode(project, make_task(project), steps=[{}])
    screenshot = episode.steps.get(index=0).screenshot
    stack = ProcessStack([], [])
    try:
        # daphne behind a TLS proxy, which says so in X-Forwarded-Proto
        base = start_daphne_on(stack, tmp_path, stack_env(**PRODUCTION), free_port(), name="daphne-production")
        https = {"X-Forwarded-Proto": "https", "Referer": base.replace("http:", "https:") + "/"}
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), NoRedirect)

        def call(method, path, body=None, headers=None):
            request = urllib.request.Request(base + path, method=method, headers={**https, **(headers or {})},
                                             data=json.dumps(body).encode() if body is not None else None)
            request.add_header("Content-Type", "application/json")
            try:
                with opener.open(request, timeout=15) as response:
                    return response.status, response.headers, response.read()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.headers, exc.read()

        # plain HTTP (no proxy header) is sent to HTTPS
        plain = urllib.request.build_opener(NoRedirect)
        try:
            plain.open(base + "/api/v1/auth/session", timeout=15)
            raise AssertionError("plain HTTP was served")
        except urllib.error.HTTPError as exc:
            assert exc.code == 301 and exc.headers["Location"].startswith("https://")

        status, headers, _ = call("GET", "/api/v1/auth/session")
        assert status == 401
        assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["X-Frame-Options"] == "DENY"
        assert headers["Referrer-Policy"] == "same-origin"
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        csrf_cookie = next(c for c in jar if c.name == "csrftoken")
        assert csrf_cookie.secure
        # /api/v1/auth/session answers over "https" only through the proxy header; the jar must send cookies back
        # over plain http to the test server, so it is told to treat them as not secure from here on
        for cookie in jar:
            cookie.secure = False
        status, headers, _ = call("POST", "/api/v1/auth/session", {"username": "prod", "password": PASSWORD},
                                  {"X-CSRFToken": csrf_cookie.value})
        assert status == 200
        session = [h for h in headers.get_all("Set-Cookie") if h.startswith("sessionid=")][0].lower()
        assert "secure" in session and "httponly" in session and "samesite=lax" in session
        for cookie in jar:
            cookie.secure = False
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        status, _, body = call("PATCH", f"/api/v1/projects/{project.pk}/", {"description": "no token"})
        assert status == 403 and "CSRF" in json.loads(body)["detail"]
        status, _, _ = call("PATCH", f"/api/v1/projects/{project.pk}/", {"description": "with token"},
                            {"X-CSRFToken": csrf})
        assert status == 200
        # stored files: only through the permission-checked view, never at a path of their own
        status, headers, body = call("GET", f"/api/v1/episodes/{episode.pk}/steps/0/screenshot")
        assert status == 200 and headers["Content-Type"] == "image/jpeg"
        for path in (f"/media/{screenshot}", f"/static/../media/{screenshot}", f"/{screenshot}"):
            status, headers, body = call("GET", path)
            assert not body.startswith(b"\xff\xd8"), f"{path} served a stored screenshot"
    finally:
        stack.stop()
