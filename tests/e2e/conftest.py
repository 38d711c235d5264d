"""Playwright in the real (Debian) Chromium against a real daphne serving the built frontend."""
from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("LOUPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}; `make setup` installs it")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def microphone_wav(spoken: Path, out: Path, *, silence_after_s: float) -> Path:
    """``spoken`` as Chromium's fake microphone plays it: a second of silence first (the device opens before
    recording starts), ``silence_after_s`` after (the speaker has clearly stopped), 48 kHz mono PCM."""
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-i", str(spoken),
                    "-af", f"adelay=1000,apad=pad_dur={silence_after_s:g}", "-ar", "48000", "-ac", "1",
                    "-c:a", "pcm_s16le", str(out)], check=True, timeout=60)
    return out


@contextmanager
def chromium_with_microphone(wav: Path):
    """A Chromium of its own: the shared flags plus a fake microphone that plays ``wav`` once."""
    from playwright.sync_api import sync_playwright

    args = [*CHROMIUM_ARGS, "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={wav}%noloop"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield browser
        finally:
            browser.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep what the page showed when a browser test fails (test-artifacts/failed-<test>.png), and show the
    tails of the server logs (daphne, workers) in the report."""
    report = yield
    if report.when == "call" and report.failed:
        page = item.funcargs.get("page")
        if page is not None and not page.is_closed():
            try:
                screenshot(page, f"failed-{item.name}"[:120])
            except Exception:  # the browser may be what failed
                pass
        for name in ("session_stack", "module_stack", "process_stack"):
            stack = item.funcargs.get(name)
            stack = stack[0] if isinstance(stack, tuple) else stack
            if stack is not None and getattr(stack, "logs", None):
                report.sections.append((f"server logs ({name})", stack.tail(80)))
    return report


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    yield page
    context.close()
    _servers_done_with_the_database()


def _servers_done_with_the_database(timeout: float = 10) -> None:
    """Wait until no other connection to the test database is in a query or a transaction: a request daphne was
    still answering for the closed page held a table lock the flush after the test needed, while waiting for one
    the flush had taken (a deadlock in CI, and the next test's setup found the last test's rows). Tests without
    database access skip this; a server busy past the timeout is left to the flush, as before."""
    import time

    from django.db import connection

    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND "
                               "pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')")
                if cursor.fetchone()[0] == 0:
                    return
            time.sleep(0.05)
    except RuntimeError:  # pytest-django's blocker: this test has no database
        return


def screenshot(page, name: str) -> Path:
    """Keep a screenshot for people to look at (test-artifacts/ is git-ignored)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def login(page, base: str, username: str, password: str) -> None:
    page.goto(base + "/login")
    page.get_by_test_id("login-username").fill(username)
    page.get_by_test_id("login-password").fill(password)
    page.get_by_test_id("login-submit").click()
