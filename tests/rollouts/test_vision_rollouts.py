"""A screen-reading checkpoint end to end: `python -m trainer serve` of a tiny Qwen2.5-VL (trainer/tiny_vlm.py) answers
the rollout worker's prompts, which carry the current screenshot and the earlier ones, in UI-TARS's format; the
stored steps say so and their prompts turn back into exactly what the server was sent. The server refuses bad image
parts with a 400 that says what is wrong.

The tiny VLM is untrained: it answers garbage, which must become void turns with their reason, never a crash. Its
own module: one serve process (its start imports TRL's chat templates, seconds) for both tests."""
from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler

import pytest
from django.core.files.storage import default_storage
from PIL import Image

from agent.images import image_bytes, image_url
from agent.prompt import FORMAT_SYSTEM_PROMPTS
from cycles import cycle_settings
from training import deployments
from rollouts import episodes
from rollouts.models import Episode, EpisodeStatus
from rollouts.steps import prompt_as_sent
from tests.factories import make_member, make_project, make_task, make_user
from tests.stack import ProcessStack, stack_env, start_policy_server, start_worker, trainer_start, wait_for

SERVED = "tiny-vlm"
ANSWER_TOKENS = 8  # the proxy asks for this many tokens at most: garbage is garbage at any length


@pytest.fixture(scope="module")
def vlm_server(tmp_path_factory):
    """(base URL ending in /v1, checkpoint dir) of `python -m trainer serve` over an untrained tiny VLM."""
    from trainer.tiny_vlm import save_tiny_vlm

    folder = tmp_path_factory.mktemp("vlm")
    save_tiny_vlm(folder / "vlm")  # here: a process of its own started Python and imported torch again (some 9 s)
    with open(folder / "serve.log", "wb") as log:
        proc = trainer_start("serve", "--init", str(folder / "vlm"), "--port", "0", "--name", SERVED,
                             "--max-new-tokens", str(ANSWER_TOKENS), stderr=log)
    try:
        line = proc.stdout.readline()
        assert line.startswith("{"), (folder / "serve.log").read_text()[-2000:]
        yield json.loads(line)["serving"], folder / "vlm"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _png(size=(160, 210)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (30, 120, 200)).save(buffer, format="PNG")
    return buffer.getvalue()


def _asking(url: str) -> dict:
    return {"model": SERVED, "max_tokens": 6, "logprobs": True, "messages": [
        {"role": "system", "content": FORMAT_SYSTEM_PROMPTS["uitars"]},
        {"role": "user", "content": [{"type": "text", "text": "Click OK."},
                                     {"type": "image_url", "image_url": {"url": url}}]}]}


def test_serve_answers_image_parts_and_refuses_bad_ones_in_plain_words(vlm_server):
    base, _ = vlm_server
    status, reply = _post(f"{base}/chat/completions", _asking(image_url(_png())))
    assert status == 200, reply
    tokens = reply["choices"][0]["logprobs"]["content"]
    assert len(tokens) == reply["usage"]["completion_tokens"] <= 6 and all(t["logprob"] <= 0 for t in tokens)
    assert reply["usage"]["prompt_tokens"] > 48  # the screenshot's image tokens are in the prompt
    assert _post(f"{base}/chat/completions", _asking(image_url(_png())))[1]["choices"][0]["message"] == \
        reply["choices"][0]["message"]  # temperature 0: greedy, the same answer
    sampled = _post(f"{base}/chat/completions", {**_asking(image_url(_png())), "temperature": 1.0})
    assert sampled[0] == 200

    bomb = io.BytesIO()
    Image.new("1", (5000, 4000)).save(bomb, format="PNG")  # a few KB that decode to 20 million pixels
    refused = {
        "https://example.org/screen.png": "only data: URLs are accepted",
        "data:image/png;base64,bm90IGFuIGltYWdl": "the data is not an image this server can read",
        "data:image/png;base64,@@@": "the image is not valid base64",
        image_url(bomb.getvalue()): "the image is 5000x4000 pixels, over the cap of 16,777,216 pixels",
        "data:image/png;base64," + "A" * (11 * 2**20 * 4 // 3): "over the 10 MB cap",
    }
    for url, message in refused.items():
        status, reply = _post(f"{base}/chat/completions", _asking(url))
        assert status == 400 and message in reply["error"]["message"], (url[:40], reply)
        assert reply["error"]["message"].startswith("messages[1].content[1]: ")  # which part
    sliver = image_url(_png((5000, 2)))
    status, reply = _post(f"{base}/chat/completions", _asking(sliver))
    assert status == 400
    assert "image processor cannot take these images: absolute aspect ratio" in reply["error"]["message"]
    status, reply = _post(f"{base}/chat/completions", {"model": SERVED, "messages": [
        {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": image_url(_png())}}]}]})
    assert status == 400 and "images go in user messages only" in reply["error"]["message"]


class Proxy(BaseHTTPRequestHandler):
    """Between the rollout worker and trainer serve: keeps every request body as the worker sent it, and asks the
    server for ANSWER_TOKENS tokens at most (the worker asks UI-TARS for 384: a plan and an action)."""

    target = ""
    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Proxy.bodies.append(body)
        forwarded = urllib.request.Request(Proxy.target + self.path, headers={"Content-Type": "application/json"},
                                           data=json.dumps({**body, "max_tokens": ANSWER_TOKENS}).encode())
        try:
            with urllib.request.urlopen(forwarded, timeout=120) as response:
                status, data = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _images(messages: list[dict]) -> list[str]:
    return [part["image_url"]["url"] for m in messages if isinstance(m["content"], list) for part in m["content"]
            if part["type"] == "image_url"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_reading_checkpoint_is_sent_its_screenshots_and_its_steps_are_read_in_its_format(vlm_server, tmp_path):
    base, folder = vlm_server
    Proxy.target, Proxy.bodies = base.removesuffix("/v1"), []
    proxy = start_policy_server(Proxy)
    stack = ProcessStack([], [])
    try:
        start_worker(stack, tmp_path, stack_env(LOUPE_OPENAI_BASE_URL=f"http://127.0.0.1:{proxy.server_address[1]}",
                                                LOUPE_OPENAI_RETRIES=0, LOUPE_OPENAI_TIMEOUT_SECONDS=120),
                     queues="live,rollouts")
        project, manager = make_project(), make_user()
        make_member(project, manager, "manager")
        task = make_task(project, "click-button", max_steps=6)
        checkpoint = deployments.checkpoint_register(project=project, name="tiny-vlm", uri=str(folder),
                                                     action_format="uitars")
        assert checkpoint.reads_images  # a vision-language dir reads screenshots unless told otherwise
        deployments.deployment_promote(project=project, checkpoint=checkpoint, backend="openai", served_name=SERVED)
        cycle_settings.settings_set(project=project, actor=manager, history_images=2)

        episode = episodes.episodes_start(project=project, task=task, seeds=[3], mode="autonomous", actor=manager)[0]
        wait_for(lambda: Episode.objects.get(pk=episode.pk).status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED),
                 timeout=120, what=f"episode {episode.pk} to end\n{stack.tail()}")
    finally:
        stack.stop()
        proxy.shutdown()
    episode = Episode.objects.get(pk=episode.pk)
    assert (episode.status, episode.end_reason) == (EpisodeStatus.FINISHED, "void_turns: the task's check did not run"), \
        episode.end_reason
    steps = list(episode.steps.order_by("index"))
    assert len(steps) == 3 == len(Proxy.bodies)  # three garbage answers in a row end it
    for step, body in zip(steps, Proxy.bodies):
        assert step.action_format == "uitars" and step.void and step.void_reason
        assert step.raw_output and 0 < len(step.token_logprobs) <= ANSWER_TOKENS  # logprobs as for a text model
        assert all(logprob <= 0 for logprob in step.token_logprobs)
        assert body["model"] == SERVED and body["max_tokens"] == 384
        assert body["messages"][0]["content"] == FORMAT_SYSTEM_PROMPTS["uitars"]
        assert prompt_as_sent(step.prompt) == body["messages"]  # stored: what was sent, base64 aside
    # the current screenshot and up to 2 earlier ones, each the bytes of the step it shows, as annotators see it
    assert [len(_images(body["messages"])) for body in Proxy.bodies] == [1, 2, 3]
    for index, body in enumerate(Proxy.bodies):
        for url, shown in zip(_images(body["messages"]), steps[max(index - 2, 0):index + 1]):
            with default_storage.open(shown.screenshot) as handle:
                assert image_bytes(url) == handle.read()
    assert _images(steps[2].prompt) == [f"loupe-storage:{s.screenshot}" for s in steps]
    # earlier garbage is shown back to the model as it wrote it
    assert [m["content"] for m in Proxy.bodies[2]["messages"] if m["role"] == "assistant"] == \
        [s.raw_output for s in steps[:2]]
