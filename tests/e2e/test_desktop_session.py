"""A supervised desktop episode through the real page: a real worker runs galculator on a real Xvfb, the
annotator approves the model's first click, takes over and clicks two calculator buttons on the scaled
1280x720 screenshot (each click lands on the button: the task's evaluator scores the result), hands back and
approves the rest. The stored screenshots are 1280x720, and the replay shows the episode. In mousepad, text and
a ctrl+s typed in the takeover panel reach the desktop: the file is saved with the text."""
import io
import shutil

import pytest
from django.core.files.storage import default_storage
from PIL import Image

from annotation.models import Intervention
from training import deployments
from rollouts.models import Checkpoint, Episode, Step
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import wait_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("Xvfb") is None or shutil.which("galculator") is None,
                       reason="needs the desktop packages (make test-tools installs them)"),
]


@pytest.fixture
def desktop_project(tmp_path):
    from trainer.model import save_tiny_untrained

    project = make_project("Desktop steering")
    make_member(project, make_user("deskhand"))
    make_member(project, make_user("deskboss"), "manager")
    task = make_task(project, "desktop-calc-multiply", env_kind="desktop", max_steps=14)
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-solver", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    return project, task


def start_episode(page, base: str, project, task) -> int:
    page.goto(f"{base}/projects/{project.pk}/episodes")
    page.get_by_test_id("start-task").select_option(str(task.pk))
    page.get_by_test_id("start-submit").click()
    page.wait_for_url("**/episodes/*", timeout=30_000)
    return int(page.url.rstrip("/").split("/")[-1])


def approve(page, index: int) -> None:
    page.locator(f'[data-testid="proposal"][data-index="{index}"]').wait_for(timeout=60_000)
    page.get_by_test_id("cmd-approve").click()


def click_button(page, step: Step, label: str) -> tuple[int, int]:
    """Click the calculator button ``label`` on the screenshot as shown; returns its centre in desktop pixels."""
    button = next(e for e in step.elements if e["role"] == "toggle button" and e["text"] == label)
    image = page.get_by_test_id("episode-screenshot")
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    image.click(position={"x": box["width"] * (button["x"] + 0.5) / 1280, "y": box["height"] * (button["y"] + 0.5) / 720})
    return button["x"], button["y"]


def test_annotator_takes_over_a_desktop_episode_and_clicks_on_the_scaled_screen(daphne_server, celery_worker, page,
                                                                                 desktop_project):
    project, task = desktop_project
    login(page, daphne_server, "deskhand", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    episode_id = start_episode(page, daphne_server, project, task)

    approve(page, 0)  # the model clicks "1"
    page.locator('[data-testid="proposal"][data-index="1"]').wait_for(timeout=60_000)
    viewer = page.get_by_test_id("viewer")
    assert viewer.get_attribute("data-wide") == "true"
    box = page.get_by_test_id("episode-screenshot").bounding_box()
    assert 900 < box["width"] < 1280 and abs(box["width"] / box["height"] - 1280 / 720) < 0.01  # scaled to the page
    screenshot(page, "desktop-session-proposal")

    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("cmd-handback").wait_for(timeout=30_000)
    # the desktop streams while the person acts: the page shows a live frame with its badge (checked in one look:
    # under load a frame can go stale between two reads, and the page then falls back to the proposal's still)
    page.locator('[data-testid="screen-frame"][data-live="true"]:has([data-testid="live-badge"]) '
                 'img[data-testid="episode-screenshot"][src^="data:image/jpeg"]').wait_for(timeout=20_000)
    screenshot(page, "desktop-session-live")
    first = Step.objects.get(episode_id=episode_id, index=0)
    two = click_button(page, first, "2")
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(), 60, what="the first human click")
    three = click_button(page, first, "3")
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=2).exists(), 60, what="the second human click")
    screenshot(page, "desktop-session-takeover")
    page.get_by_test_id("cmd-handback").click()
    for index in range(3, 8):  # "*", "4", "5", "=", then finished
        approve(page, index)
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 60, what="the episode to end")
    page.get_by_test_id("episode-status").filter(has_text="finished").wait_for(timeout=30_000)
    screenshot(page, "desktop-session-finished")

    episode = Episode.objects.get(pk=episode_id)
    assert episode.env_reward == 1.0, episode.end_reason  # 123 x 45 = 5535 on the display: every click landed
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.actor for s in steps] == ["model", "human", "human", "model", "model", "model", "model", "model"]
    for step, (x, y) in ((steps[1], two), (steps[2], three)):
        assert step.action["name"] == "click"
        assert abs(step.action["args"]["x"] - x) <= 1 and abs(step.action["args"]["y"] - y) <= 1
    for step in steps:
        with default_storage.open(step.screenshot, "rb") as handle:
            assert Image.open(io.BytesIO(handle.read())).size == (1280, 720) == (step.width, step.height)
    kinds = list(Intervention.objects.filter(episode=episode).values_list("kind", flat=True))
    assert kinds[:4] == ["approve", "takeover", "act", "act"] and "handback" in kinds
    assert page.errors == []

    # the replay shows the desktop's screens (a manager's page)
    page.context.clear_cookies()
    login(page, daphne_server, "deskboss", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode_id}")
    shot = page.locator("img[data-testid]").first
    shot.wait_for(timeout=30_000)
    wait_for(lambda: shot.evaluate("img => img.complete && img.naturalWidth") == 1280, 20, what="the replay's screenshot")
    screenshot(page, "desktop-replay")


def test_text_and_keys_typed_in_the_takeover_panel_reach_the_desktop(daphne_server, celery_worker, page,
                                                                      desktop_project):
    project, _ = desktop_project
    task = make_task(project, "desktop-mousepad-write", env_kind="desktop", max_steps=8)
    login(page, daphne_server, "deskhand", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    episode_id = start_episode(page, daphne_server, project, task)
    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=60_000)
    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("type-text").fill("Meeting at noon")
    page.get_by_test_id("type-submit").click()
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=0).exists(), 60, what="the typing step")
    page.get_by_test_id("hotkey-text").fill("ctrl+s")
    page.get_by_test_id("hotkey-submit").click()
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(), 60, what="the ctrl+s step")
    screenshot(page, "desktop-session-typed")
    page.get_by_test_id("cmd-handback").click()
    approve(page, 2)  # the model sees its solution done and finishes
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 60, what="the episode to end")
    episode = Episode.objects.get(pk=episode_id)
    assert episode.env_reward == 1.0, episode.end_reason  # notes.txt holds the text: typing and ctrl+s landed
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [(s.actor, s.action_text) for s in steps] == [
        ("human", 'type(text="Meeting at noon")'), ("human", 'hotkey(keys="ctrl+s")'), ("model", 'finished(answer="")')]
    assert page.errors == []


def test_a_hybrid_episode_shows_what_the_shell_printed(daphne_server, celery_worker, page, desktop_project):
    project, _ = desktop_project
    task = make_task(project, "desktop-hybrid-count", env_kind="desktop", max_steps=8)
    login(page, daphne_server, "deskhand", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    episode_id = start_episode(page, daphne_server, project, task)
    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=60_000)
    assert page.get_by_test_id("action-label").inner_text() == "$ ls ~/notes/*.txt | wc -l"
    page.get_by_test_id("cmd-approve").click()
    output = page.get_by_test_id("shell-output")
    output.wait_for(timeout=60_000)
    assert output.text_content() == "Shell output (exit code 0)3"  # the heading, then what the command printed
    screenshot(page, "desktop-session-shell")
    for index in (1, 2, 3):  # type 3, ctrl+s, finished
        approve(page, index)
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 60, what="the episode to end")
    episode = Episode.objects.get(pk=episode_id)
    assert episode.env_reward == 1.0, episode.end_reason
    assert Step.objects.get(episode=episode, index=0).info["output"] == "3\n"
    assert page.errors == []
