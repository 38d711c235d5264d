"""The live view through the real page: a manager watches a supervised webapp episode (a page the test serves, in the
worker's Chromium) and sees the "Live" badge and frames that follow the page as it changes on its own, with no step;
then takes over and clicks, types and presses a key on the live frame: each reaches the page, the clicks where they
were aimed on the env's 1280x720 screen."""
import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from PIL import Image

from rollouts import episodes
from rollouts.models import Step
from tests.e2e.conftest import login, screenshot
from tests.factories import PASSWORD, make_member, make_project, make_task, make_user
from tests.stack import (ChatModel, ProcessStack, deploy_served_checkpoint, free_port, stack_env, start_daphne,
                         start_policy_server, start_together, start_worker, wait_for)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

PANEL = (240, 270)  # the centre of the panel whose colour the test changes, in the env's pixels
NAME = (750, 220)  # the text box
PRESS = (700, 440)  # the button (its label in the middle)
PRESS_FILL = (615, 410)  # a corner of the button, off its label
PAGE = """<!doctype html><html><head><title>Live page</title><style>
body { margin: 0; font-family: sans-serif; background: #fff; }
#panel { position: absolute; left: 40px; top: 120px; width: 400px; height: 300px; background: rgb(200, 200, 200); }
#name { position: absolute; left: 600px; top: 200px; width: 300px; height: 40px; font-size: 20px; }
#press { position: absolute; left: 600px; top: 400px; width: 200px; height: 80px; font-size: 24px; border: 0;
         background: rgb(0, 0, 255); color: #fff; }
#result { position: absolute; left: 600px; top: 520px; font-size: 24px; }
</style></head><body><h1>Live page</h1><div id="panel"></div><input id="name" aria-label="Name">
<button id="press" onclick="this.style.background='rgb(0, 160, 0)'; result.textContent='Pressed'">Press me</button>
<div id="result">Not pressed</div>
<script>
setInterval(async () => {
  try { panel.style.background = (await (await fetch('/state')).json()).color; } catch (e) {}
}, 200);
</script></body></html>"""


class LivePage(BaseHTTPRequestHandler):
    """The team's app the task opens; /state is the panel's colour, which the test changes behind the env's back."""

    color = "rgb(200, 200, 200)"

    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"color": LivePage.color}).encode() if self.path == "/state" else PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if self.path == "/state" else "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class WaitingModel(ChatModel):
    """A policy server that always proposes to wait: the person decides everything here."""

    def answer(self, body: dict) -> str:
        return "Thought: I wait for the page.\nAction: wait()"


@pytest.fixture
def live_stack(tmp_path):
    LivePage.color = "rgb(200, 200, 200)"
    site = ThreadingHTTPServer(("127.0.0.1", free_port()), LivePage)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    policy = start_policy_server(WaitingModel)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "live.json").write_text(json.dumps({
        "task_id": "live-page", "instruction": "Type Ada into the box, then press the button.",
        "start_url": f"http://127.0.0.1:{site.server_address[1]}/", "max_steps": 10,
        "check": {"type": "dom_content", "selector": "#result", "must_include": ["Pressed"]}}))
    stack = ProcessStack([], [])
    env = stack_env(LOUPE_WEBAPP_TASKS_DIR=tasks, LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{policy.server_address[1]}")
    try:
        base, _ = start_together(lambda: start_daphne(stack, tmp_path, env),
                                 lambda: start_worker(stack, tmp_path, env, queues="live,rollouts"))
        project = make_project("Live view")
        manager = make_user("liveboss")
        make_member(project, manager, "manager")
        task = make_task(project, "live-page", env_kind="webapp", max_steps=10)
        deploy_served_checkpoint(project, tmp_path, "waiter")
        yield base, project, task, manager
    finally:
        stack.stop()
        policy.shutdown()
        site.shutdown()


def _frame(page) -> Image.Image | None:
    """The picture the session page shows now, when it is a live frame (a data: URL), decoded."""
    src = page.get_by_test_id("episode-screenshot").get_attribute("src") or ""
    prefix = "data:image/jpeg;base64,"
    return Image.open(io.BytesIO(base64.b64decode(src[len(prefix):]))).convert("RGB") if src.startswith(prefix) else None


def _shows(page, at: tuple[int, int], colour: tuple[int, int, int]) -> bool:
    frame = _frame(page)
    return frame is not None and all(abs(a - b) <= 24 for a, b in zip(frame.getpixel(at), colour))


def _click(page, at: tuple[int, int]) -> None:
    image = page.get_by_test_id("episode-screenshot")
    image.scroll_into_view_if_needed()
    box = image.bounding_box()
    image.click(position={"x": box["width"] * (at[0] + 0.5) / 1280, "y": box["height"] * (at[1] + 0.5) / 720})


def test_a_manager_sees_the_live_screen_change_without_a_step_and_acts_on_the_live_frame(live_stack, page):
    base, project, task, manager = live_stack
    episode_id = episodes.episodes_start(project=project, task=task, seeds=[0], mode="supervised", actor=manager)[0].pk
    login(page, base, "liveboss", PASSWORD)
    page.get_by_test_id("project-card").first.wait_for(timeout=20_000)
    page.goto(f"{base}/episodes/{episode_id}")
    page.locator('[data-testid="proposal"][data-index="0"]').wait_for(timeout=60_000)
    page.get_by_test_id("live-badge").wait_for(timeout=20_000)
    frame = wait_for(lambda: _frame(page), 20, what="a live frame")  # one read: a frame may go stale between two
    assert frame.size == (1280, 720)
    assert _shows(page, PANEL, (200, 200, 200))

    LivePage.color = "rgb(255, 0, 0)"  # the page changes on its own while the proposal waits
    wait_for(lambda: _shows(page, PANEL, (255, 0, 0)), 15, what="a live frame with the red panel")
    screenshot(page, "live-view-changed")
    assert not Step.objects.filter(episode_id=episode_id).exists()  # no step ran: the frames alone showed it

    page.get_by_test_id("cmd-takeover").click()
    page.get_by_test_id("cmd-handback").wait_for(timeout=30_000)
    wait_for(lambda: _shows(page, PANEL, (255, 0, 0)), 15, what="the live frame under the takeover")
    page.get_by_test_id("live-badge").wait_for(timeout=10_000)
    _click(page, NAME)
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=0).exists(), 60, what="the click in the box")
    wait_for(lambda: _frame(page) is not None, 15, what="the live frame after the click")
    page.get_by_test_id("type-text").fill("Ada")
    page.get_by_test_id("type-submit").click()
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=1).exists(), 60, what="the typed text")
    wait_for(lambda: _frame(page) is not None, 15, what="the live frame after typing")
    page.get_by_test_id("key-backspace").click()  # a key, from the takeover panel
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=2).exists(), 60, what="the key")
    wait_for(lambda: _frame(page) is not None, 15, what="the live frame after the key")
    _click(page, PRESS)
    wait_for(lambda: Step.objects.filter(episode_id=episode_id, index=3).exists(), 60, what="the click on the button")
    wait_for(lambda: _shows(page, PRESS_FILL, (0, 160, 0)), 15, what="a live frame with the pressed (green) button")
    screenshot(page, "live-view-takeover")

    steps = list(Step.objects.filter(episode_id=episode_id).order_by("index"))
    assert [s.actor for s in steps] == ["human"] * 4
    assert [s.action["name"] for s in steps] == ["click", "type", "hotkey", "click"]
    for step, aimed in ((steps[0], NAME), (steps[3], PRESS)):
        assert abs(step.action["args"]["x"] - aimed[0]) <= 1 and abs(step.action["args"]["y"] - aimed[1]) <= 1
    # each step keeps the screen it acted on: typed, then one character taken back, before the button is pressed
    assert ("textbox", "Ada") in {(e["role"], e["text"]) for e in steps[2].elements}
    assert ("textbox", "Ad") in {(e["role"], e["text"]) for e in steps[3].elements}
    assert page.errors == []
