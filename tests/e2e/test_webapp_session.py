"""A supervised webapp episode through the real page: a real worker runs the django-oscar shop in Chromium, the
annotator approves the model's first steps, takes over and clicks "Add to basket" on the scaled 1280x720 screenshot
(the click lands on the button: the shop's database then holds the basket line the task checks), hands back and
approves the model's finish. The stored screenshots are 1280x720 and the replay shows the shop."""
import concurrent.futures
import io

import pytest
from django.core.files.storage import default_storage
from PIL import Image

from annotation.models import Intervention
from training import deployments
from rollouts.models import Checkpoint, Episode, Step
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.fixture
def shop_project(tmp_path):
    from trainer.model import save_tiny_untrained

    project = make_project("Shop steering")
    make_member(project, make_user("shophand"))
    make_member(project, make_user("shopboss"), "manager")
    task = make_task(project, "shop-add-to-basket", env_kind="webapp", max_steps=10)
    save_tiny_untrained(tmp_path / "ckpt")
    checkpoint = Checkpoint.objects.create(project=project, name="scripted-solver", uri=str(tmp_path / "ckpt"))
    deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="scripted", reason="test oracle")
    return project, task


def _add_to_basket_button() -> tuple[int, int]:
    """Where the product page shows "Add to basket", read by the env itself (the page is the same in the worker);
    in a thread of its own, as this one's Playwright drives the test's browser."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(_read_button).result(timeout=120)


def _read_button() -> tuple[int, int]:
    from agent.envs.webapp import WebAppEnv, load_task

    probe = load_task({"task_id": "probe", "start_url": "__SHOP__/catalogue/bluetooth-speaker_16/", "intent": "look",
                       "eval": {"eval_types": ["url_match"], "reference_url": "__SHOP__/"}})
    with WebAppEnv(tasks={"probe": probe}) as env:
        button = next(e for e in env.reset("probe", 0).elements if e.text == "Add to basket")
    return button.x, button.y


def approve(page, index: int) -> None:
    page.locator(f'[data-testid="proposal"][data-index="{index}"]').wait_for(timeout=60_000)
    page.get_by_test_id("cmd-approve").click()


def test_annotator_takes_over_a_webapp_episode_and_adds_to_the_basket_on_the_scaled_screen(
        daphne_server, celery_worker, page, shop_project):
    project, task = shop_project
    x, y = _add_to_basket_button()
    login(page, daphne_server, "shophand", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/episodes")
    page.get_by_test_id("start-task").select_option(str(task.pk))
    page.get_by_test_id("start-submit").click()
    page.wait_for_url("**/episodes/*", timeout=30_000)
    episode_id = int(page.url.rstrip("/").split("/")[-1])

    clicked = 0  # the model scrolls while the product's link is below the fold, then clicks "Bluetooth Speaker"
    while True:
        approve(page, clicked)
        wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=clicked).exists(), 60, what="the step")
        if Step.objects.get(episode_id=episode_id, index=clicked).action["name"] == "click":
            break
        clicked += 1
        assert clicked < 5, "the model never clicked the product"
    human = clicked + 1
    page.locator(f'[data-testid="proposal"][data-index="{human}"]').wait_for(timeout=60_000)
    box = page.get_by_test_id("episode-screenshot").bounding_box()
    assert abs(box["width"] / box["height"] - 1280 / 720) < 0.01
    screenshot(page, "webapp-session-proposal")

    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("cmd-handback").wait_for(timeout=30_000)
    image = page.get_by_test_id("episode-screenshot")
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    image.click(position={"x": box["width"] * (x + 0.5) / 1280, "y": box["height"] * (y + 0.5) / 720})
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=human).exists(), 60, what="the human click")
    screenshot(page, "webapp-session-takeover")
    page.get_by_test_id("cmd-handback").click()
    approve(page, human + 1)  # the model sees the product in the basket and finishes
    wait_for(lambda: Episode.objects.get(pk=episode_id).status in ("finished", "failed"), 60, what="the episode to end")
    page.get_by_test_id("episode-status").filter(has_text="finished").wait_for(timeout=30_000)
    screenshot(page, "webapp-session-finished")

    episode = Episode.objects.get(pk=episode_id)
    assert episode.env_reward == 1.0, episode.end_reason  # the shop's database holds the basket line
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.actor for s in steps] == ["model"] * human + ["human", "model"]
    assert steps[human].action["name"] == "click"
    assert abs(steps[human].action["args"]["x"] - x) <= 1 and abs(steps[human].action["args"]["y"] - y) <= 1
    assert "/catalogue/bluetooth-speaker_16/" in steps[human].url
    for step in steps:
        with default_storage.open(step.screenshot, "rb") as handle:
            assert Image.open(io.BytesIO(handle.read())).size == (1280, 720) == (step.width, step.height)
    kinds = list(Intervention.objects.filter(episode=episode).values_list("kind", flat=True))
    assert kinds[:human + 2] == ["approve"] * human + ["takeover", "act"] and "handback" in kinds
    assert page.errors == []

    page.context.clear_cookies()
    login(page, daphne_server, "shopboss", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{daphne_server}/projects/{project.pk}/review/{episode_id}")
    shot = page.locator("img[data-testid]").first
    shot.wait_for(timeout=30_000)
    wait_for(lambda: shot.evaluate("img => img.complete && img.naturalWidth") == 1280, 20, what="the replay's screenshot")
    screenshot(page, "webapp-replay")
