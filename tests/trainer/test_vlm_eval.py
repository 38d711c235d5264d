"""`python -m trainer eval` of a vision-language checkpoint: an untrained tiny Qwen2.5-VL (trainer/tiny_vlm.py) that
answers in UI-TARS's format rolls out in the real MiniWoB env through trainer.vlm_serve's VisionPolicy, its prompts
carrying the current screenshot and --history-images earlier ones; metrics.json counts its garbage as void turns,
with their reasons. Dirs it cannot evaluate exit 2 with one plain line, before anything is written."""
from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from agent.images import image_url
from agent.prompt import FORMAT_SYSTEM_PROMPTS
from tests.stack import trainer_run
from trainer import cli
from trainer.tiny_vlm import save_tiny_vlm
from trainer.vlm_serve import VisionPolicy


@pytest.fixture(scope="module")
def uitars_vlm(tmp_path_factory) -> Path:
    """An untrained tiny VLM dir whose loupe.json says it answers in uitars and reads screenshots."""
    path = save_tiny_vlm(tmp_path_factory.mktemp("vlm") / "uitars")
    (path / "loupe.json").write_text(json.dumps({"action_format": "uitars", "reads_images": True,
                                                 "prompt_style": "full"}))
    return path


def _png(box_x: int) -> bytes:
    image = Image.new("RGB", (160, 210), "white")
    ImageDraw.Draw(image).rectangle([box_x, 40, box_x + 40, 60], fill=(0, 0, 200))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_eval_of_a_tiny_vlm_sends_its_screenshots_in_uitars_and_reports_void_turns(uitars_vlm, tmp_path):
    out = tmp_path / "eval"
    _, stdout, _ = trainer_run("eval", "--init", str(uitars_vlm), "--out", str(out), "--tasks", "click-test",
                               "--seeds", "100000-100001", "--max-episode-steps", "2", "--max-new-tokens", "8",
                               "--history-images", "1", "--threads", "2")
    done = json.loads(stdout.splitlines()[-1])
    assert done["done"] is True
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics == done["metrics"]
    assert metrics["prompting"] == {"action_format": "uitars", "with_image": True, "history_images": 1,
                                    "pixels": {"min_pixels": 3136, "max_pixels": 200704}}  # its processor's grid
    overall = metrics["overall"]
    assert overall["episodes"] == 2 and overall["success_rate"] == 0.0  # untrained: it answers garbage

    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [e["seed"] for e in episodes] == [100000, 100001]
    turns = sum(e["steps"] for e in episodes)
    void = sum(e["void_turns"] for e in episodes)
    assert turns >= 2 and void >= 1 and overall["void_rate"] == pytest.approx(void / turns)
    assert sum(r["turns"] for r in overall["void_reasons"]) == void
    assert all(r["reason"] for r in overall["void_reasons"])
    assert metrics["per_task"]["click-test"]["void_reasons"] == overall["void_reasons"]
    for episode in episodes:
        assert episode["error"] is None and episode["end_reason"] in ("max_steps", "done", "finished")
        # the first step's prompt carries its screenshot, the second's also the one before (--history-images 1)
        assert episode["prompt_images"] == [min(i, 1) + 1 for i in range(episode["steps"])]


def test_vision_policy_reads_the_screenshot_it_is_sent(uitars_vlm):
    policy = VisionPolicy(uitars_vlm, max_new_tokens=4)

    def ask(png: bytes):
        return policy.act([{"role": "system", "content": FORMAT_SYSTEM_PROMPTS["uitars"]},
                           {"role": "user", "content": [{"type": "text", "text": "Click the button."},
                                                        {"type": "image_url", "image_url": {"url": image_url(png)}}]}])

    left, again, right = ask(_png(10)), ask(_png(10)), ask(_png(110))
    assert left.error is None and len(left.token_logprobs) == len(left.token_ids) > 0
    assert again.token_ids == left.token_ids and again.token_logprobs == left.token_logprobs  # greedy
    assert right.token_logprobs != left.token_logprobs  # another screen, another distribution
    broken = policy.act([{"role": "user", "content": [{"type": "image_url",
                                                        "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
    assert broken.text == "" and "not an image this server can read" in broken.error  # reported, not raised


def _no_processor(source: Path, dest: Path) -> Path:
    dest.mkdir()
    for name in ("config.json", "model.safetensors", "loupe.json"):
        shutil.copy(source / name, dest / name)
    return dest


def _text_dir(dest: Path, loupe: dict | None = None) -> Path:
    dest.mkdir()
    (dest / "config.json").write_text(json.dumps({"model_type": "llama"}))
    if loupe is not None:
        (dest / "loupe.json").write_text(json.dumps(loupe))
    return dest


@pytest.mark.parametrize("case, options, message", [
    ("empty", [], "is not a checkpoint dir (no config.json there)"),
    ("no_processor", [], "has no processor: no image processor (preprocessor_config.json), no tokenizer"),
    ("text", ["--history-images", "2"], "does not read screenshots, so it cannot be sent earlier ones"),
    ("vlm", ["--history-images", "-1"], "--history-images must be 0 or more, got -1"),
    ("bad_format", [], "names the answer format 'bogus'; expected one of: loupe, uitars"),
    ("text_reading", [], "says it reads images, but its config.json has no vision_config"),
])
def test_a_dir_eval_cannot_take_exits_2_with_one_plain_line(uitars_vlm, tmp_path, capsys, case, options, message):
    init = {"empty": lambda: (tmp_path / "empty").mkdir() or tmp_path / "empty",
            "no_processor": lambda: _no_processor(uitars_vlm, tmp_path / "bare"),
            "text": lambda: _text_dir(tmp_path / "text"),
            "vlm": lambda: uitars_vlm,
            "bad_format": lambda: _text_dir(tmp_path / "fmt", {"action_format": "bogus"}),
            "text_reading": lambda: _text_dir(tmp_path / "reading", {"reads_images": True})}[case]()
    out = tmp_path / "out"
    code = cli.main(["eval", "--init", str(init), "--out", str(out), "--tasks", "click-test", "--seeds", "1",
                     *options])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err and message in err, err
    assert not out.exists()
