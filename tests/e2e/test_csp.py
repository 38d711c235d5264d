"""The Content-Security-Policy in Chromium: every page of a project (and the admin) renders under it, its
screenshots, audio and live socket load, and the browser reports no violation and no page error."""
import pytest
from django.core.files.base import ContentFile
from django.core.management import call_command
from django.core.files.storage import default_storage

from annotation.models import AudioChunk, AudioClip, TranscriptWord
from projects.models import Role
from tests.annotation.audio_fixtures import encode_webm_opus, missing_tools, synthesize_wav
from tests.e2e.conftest import login, screenshot
from tests.factories import (PASSWORD, make_finished_episode, make_member, make_project, make_task, make_user)
from tests.stack import stack_env, start_daphne

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Violations as the page sees them (the event fires before the console message is written).
WATCH_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) =>
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} on ${location.pathname}`));
"""


@pytest.fixture(scope="module", autouse=True)
def admin_static_files():
    """The admin's CSS and JS where WhiteNoise serves them, as `make run` collects them, before a daphne starts
    (WhiteNoise lists STATIC_ROOT once): the admin is checked with its scripts and styles really loading."""
    call_command("collectstatic", interactive=False, verbosity=0)


@pytest.fixture(scope="module")
def daphne_server(admin_static_files, module_stack):
    """This module's own daphne, started once the admin's files are collected: the one the other modules share
    may have started before, and its WhiteNoise would not serve them."""
    stack, path = module_stack
    return start_daphne(stack, path, stack_env())


@pytest.fixture
def watched(page):
    """The page, recording every CSP violation it meets (event and console)."""
    page.add_init_script(WATCH_VIOLATIONS)
    page.csp_console = []
    page.on("console", lambda m: page.csp_console.append(m.text) if "Content Security Policy" in m.text else None)
    return page


def violations(page) -> list[str]:
    return page.evaluate("window.__cspViolations || []") + page.csp_console


def visit(page, url: str, ready: str, name: str) -> None:
    response = page.goto(url)
    assert "default-src 'self'" in response.headers.get("content-security-policy", ""), url
    page.locator(ready).first.wait_for(timeout=20_000)
    page.wait_for_load_state("networkidle")
    screenshot(page, f"csp-{name}")
    assert violations(page) == [], (url, violations(page))


def loaded_image(page, selector: str) -> bool:
    return page.locator(selector).first.evaluate("img => img.complete && img.naturalWidth > 0")


def test_every_project_page_renders_under_the_policy(daphne_server, watched, tmp_path):
    page = watched
    project = make_project("Under policy")
    manager = make_user("csp-manager")
    make_member(project, manager, Role.MANAGER)
    task = make_task(project)
    episode = make_finished_episode(project, task, steps=[{}, {}], mode="supervised", created_by=manager)
    if not missing_tools():
        audio = encode_webm_opus(synthesize_wav("The agent clicked the button.", tmp_path / "said.wav"))
        t0 = episode.steps.get(index=0).created_at.timestamp() - 1
        clip = AudioClip.objects.create(episode=episode, user=manager, client_id="c1", content_type="audio/webm",
                                        started_at=t0, finished=True, transcribed_chunks=1)
        name = default_storage.save("audio/test-csp.bin", ContentFile(audio))
        AudioChunk.objects.create(clip=clip, index=0, start_time=t0, file=name, size=len(audio), sha256="0" * 64)
        TranscriptWord.objects.create(clip=clip, position=0, word="agent", start=t0 + 0.5, end=t0 + 0.9,
                                      step=episode.steps.get(index=0))

    page.goto(daphne_server + "/login")
    page.get_by_test_id("login-username").wait_for()
    assert violations(page) == []
    login(page, daphne_server, "csp-manager", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    base = f"{daphne_server}/projects/{project.pk}"

    visit(page, base, "role=tab[name='Tasks']", "overview")
    visit(page, f"{base}/episodes", "[data-testid=episode-table]", "live-sessions")
    visit(page, f"{daphne_server}/episodes/{episode.pk}", "[data-testid=episode-status]", "episode")
    assert loaded_image(page, "[data-testid=episode-screenshot]")  # img-src: the screenshot API
    page.locator("[data-testid=connection-state][data-state=open]").wait_for(timeout=10_000)  # connect-src: the socket
    visit(page, f"{base}/runs", "[data-testid=runs-empty], [data-testid=run-list]", "runs")
    visit(page, f"{base}/cycles", "[data-testid=cycles-active-checkpoint]", "cycles")
    visit(page, f"{base}/review", "[data-testid=review-row]", "review")
    visit(page, f"{base}/review/{episode.pk}", "[data-testid=replay-current]", "replay")
    assert loaded_image(page, "[data-testid=replay-screenshot]")
    if not missing_tools():  # media-src: the recording plays from the API
        page.locator("[data-testid=clip-duration][data-known=true]").wait_for(timeout=20_000)
        assert violations(page) == []
    visit(page, f"{base}/datasets", "[data-testid=routing-form]", "datasets")
    visit(page, f"{base}/tasks", "[data-testid=task-table]", "tasks")
    page.get_by_test_id("task-new").click()  # the editor asks the server for the shipped tasks
    page.get_by_test_id("shipped-task").locator("option[value=click-button]").wait_for(state="attached", timeout=10_000)
    assert violations(page) == []
    assert page.errors == []


def test_the_admin_works_under_the_policy(daphne_server, watched):
    page = watched
    make_user("csp-staff", staff=True)
    project = make_project("Admin under policy")
    episode = make_finished_episode(project, make_task(project), steps=[{}])

    response = page.goto(f"{daphne_server}/admin/login/")
    assert "form-action 'self'" in response.headers["content-security-policy"]
    page.fill("#id_username", "csp-staff")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.locator("#site-name").wait_for(timeout=20_000)
    assert page.evaluate("getComputedStyle(document.querySelector('#header')).display") == "flex"  # its CSS loaded
    for path, name in (("/admin/", "index"), ("/admin/rollouts/episode/", "changelist"),
                       (f"/admin/rollouts/episode/{episode.pk}/change/", "change")):
        page.goto(daphne_server + path)
        page.locator("#content").wait_for(timeout=20_000)
        page.wait_for_load_state("networkidle")
        screenshot(page, f"csp-admin-{name}")
        assert violations(page) == [], (path, violations(page))
    # its scripts ran: the sidebar's filter box and the theme toggle work
    page.locator("#nav-filter").fill("epis")
    assert page.locator("#nav-sidebar tr:visible").count() < page.locator("#nav-sidebar tr").count()
    assert violations(page) == [] and page.errors == []
