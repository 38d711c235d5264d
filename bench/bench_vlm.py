"""Vision-language benchmark: prints one JSON object.

- ``screenshots``: 1280x800 JPEG screenshots (quality 80, as the envs capture them) of web pages Chromium renders
  here: a data-dense app page (a table, a form, a side menu) whose words and numbers change with the seed.
- ``sft``: TRL SFT of the tiny Qwen2.5-VL (trainer/tiny_vlm.py) on rows of those screenshots, through the real
  ``python -m trainer sft``: in one process (one torch thread, then two) and in two (``torchrun``, gloo, a thread
  each), each process taking the same rows a step; steps/s, rows/s and tokens/s of the training (start-up apart),
  image tokens per row and per step. On a shared machine the load at the start is printed beside them.
- ``image_tokens_1280x800``: what one such screenshot costs Qwen2.5-VL / UI-TARS-1.5 at their default processor
  settings (``smart_resize`` to multiples of 28 under 16384 x 28 x 28 pixels, a token each 28 x 28).
- ``request_bytes``: one policy request as agent/policies/openai_compat.py posts it (an OpenAI chat body, UI-TARS
  format, five earlier steps in the text), with 0, 1 and 5 history screenshots besides the current one, each a
  base64 ``data:`` URI: the body bytes a local HTTP server received.

Usage: ``.venv/bin/python bench/bench_vlm.py [--steps 20] [--rows 16]``. Needs Chromium (``make chromium``).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH, HEIGHT = 1280, 800
WORDS = ("invoice", "shipment", "pending", "approved", "Berlin", "Lisbon", "refund", "priority", "archived", "draft",
         "customer", "order", "review", "overdue", "paid", "Oslo", "Madrid", "Kyoto", "queued", "closed")


def page(seed: int) -> str:
    """A data-dense web app page: header, side menu, a 24-row table, a form."""
    rng = random.Random(seed)
    word = lambda: rng.choice(WORDS)  # noqa: E731 - a short local
    menu = "".join(f"<li>{word().title()} {i}</li>" for i in range(14))
    rows = "".join(f"<tr><td>#{rng.randint(10000, 99999)}</td><td>{word()} {word()}</td><td>{word().title()}</td>"
                   f"<td>{rng.randint(1, 28)}.{rng.randint(1, 12)}.2026</td><td>{rng.uniform(5, 9000):.2f} EUR</td>"
                   f"<td><button>{word()}</button></td></tr>" for _ in range(24))
    return f"""<html><head><style>
body {{ margin: 0; font: 13px sans-serif; color: #222; }} header {{ background: #1d3557; color: white; padding: 12px; }}
nav {{ float: left; width: 190px; background: #f1f3f5; height: 760px; }} nav li {{ padding: 6px; }}
main {{ margin-left: 200px; padding: 8px; }} td {{ border-bottom: 1px solid #ddd; padding: 3px 8px; }}
tr:nth-child(even) {{ background: #f8f9fb; }} button {{ background: #e63946; color: white; border: 0; }}
input {{ width: 180px; margin: 4px; }}
</style></head><body><header>Orders &middot; {word().title()} workspace &middot; user {rng.randint(1, 99)}</header>
<nav><ul>{menu}</ul></nav><main><h3>{word().title()} orders</h3>
<form>Search <input value="{word()}"> From <input value="{rng.randint(1, 28)}.01.2026"> <button>Filter</button></form>
<table>{rows}</table></main></body></html>"""


def screenshots(count: int) -> list[bytes]:
    """``count`` JPEG screenshots, captured as agent/envs/miniwob.py captures its own (CDP, quality 80)."""
    from playwright.sync_api import sync_playwright

    from agent.envs.browser import CHROMIUM_ARGS, CHROMIUM_PATH

    shots = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS, headless=True)
        tab = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}, device_scale_factor=1).new_page()
        cdp = tab.context.new_cdp_session(tab)
        for seed in range(count):
            tab.set_content(page(seed))
            shot = cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": 80, "optimizeForSpeed": True})
            shots.append(base64.b64decode(shot["data"]))
        browser.close()
    return shots


def sft_rows(folder: Path, shots: list[bytes], rows: int) -> Path:
    """SFT rows in the UI-TARS format, the prompt rendered by agent.prompt as a rollout renders it."""
    from agent.prompt import render_messages

    (folder / "images").mkdir(parents=True)
    lines = []
    for i in range(rows):
        (folder / "images" / f"s{i}.jpg").write_bytes(shots[i % len(shots)])
        x, y = 300 + 17 * i, 120 + 23 * i
        messages = render_messages(instruction=f"Open order number {i} and mark it paid.",
                                   observation_text=f"URL: https://shop.example/orders?page={i}",
                                   history=[], action_format="uitars")
        answer = f"Thought: The order sits in row {i}; I open it.\nAction: click(start_box='({x},{y})')"
        lines.append({"messages": [*messages, {"role": "assistant", "content": answer}], "images": [f"images/s{i}.jpg"]})
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def train(launch: list[str], vlm: Path, data: Path, out: Path, steps: int, threads: int) -> tuple[dict, float]:
    """One ``python -m trainer sft`` run under ``launch``: (its metrics, wall seconds)."""
    argv = [sys.executable, *launch, "-m", "trainer", "sft", "--init", str(vlm), "--data", str(data), "--out",
            str(out), "--max-steps", str(steps), "--log-every", str(steps), "--warmup-steps", "0",
            "--batch-tokens", "4096", "--max-length", "2048", "--threads", str(threads)]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    if proc.returncode != 0:
        raise SystemExit(f"trainer sft failed: {proc.stderr.strip().splitlines()[-1:]}")
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    return done["metrics"], time.monotonic() - started


def sft_figures(metrics: dict, wall: float, processes: int, batch: int) -> dict:
    seconds = metrics["train_seconds"]
    return {"processes": processes, "rows_per_step": batch * processes, "steps": metrics["steps"],
            "train_seconds": round(seconds, 2), "wall_seconds": round(wall, 1),
            "steps_per_s": round(metrics["steps"] / seconds, 3),
            "rows_per_s": round(metrics["steps"] * batch * processes / seconds, 2),
            "tokens_per_s": round(metrics["tokens_per_s"], 1), "final_loss": round(metrics["final_loss"], 4)}


def image_tokens(vlm: Path, shot: bytes) -> int:
    """Image tokens of one screenshot for the tiny VLM's processor (its pixel cap: 256 tokens at most)."""
    import io

    from PIL import Image

    from trainer.tiny_vlm import load_processor

    processor = load_processor(vlm).image_processor
    grid = processor(images=[Image.open(io.BytesIO(shot)).convert("RGB")], return_tensors="pt")["image_grid_thw"][0]
    return int(grid.prod()) // processor.merge_size ** 2


class Recorder(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that keeps the size of each request body and answers a wait."""

    sizes: list[int] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Recorder.sizes.append(len(body))
        reply = json.dumps({"model": "m", "choices": [{"message": {"content": "Action: wait()"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def request_bytes(shots: list[bytes]) -> dict:
    """Body bytes of one request with 0, 1 and 5 history screenshots (and the current one), same text each time."""
    from agent.policies.openai_compat import OpenAIPolicy
    from agent.prompt import HistoryStep, render_messages

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    policy = OpenAIPolicy(base_url=f"http://127.0.0.1:{server.server_port}", model="ui-tars-1.5-7b", retries=0)
    history = [HistoryStep(f"URL: https://shop.example/orders?page={i}",
                           f"Thought: I open order {i}.\nAction: click(x={200 + 90 * i}, y={150 + 60 * i})", WIDTH, HEIGHT)
               for i in range(5)]
    figures = {}
    try:
        for n in (0, 1, 5):
            images = shots[5 - n:6]  # n earlier screens, then the current one
            messages = render_messages(instruction="Mark the overdue orders of Lisbon as paid.",
                                       observation_text="URL: https://shop.example/orders?page=5", history=history,
                                       images=images, history_window=5, action_format="uitars")
            if policy.act(messages).error:
                raise SystemExit("the recording server did not answer")
            figures[f"history_{n}"] = Recorder.sizes[-1]
    finally:
        server.shutdown()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rows", type=int, default=16)
    args = parser.parse_args()

    from agent.formats.uitars import IMAGE_FACTOR, MAX_PIXELS, MIN_PIXELS, smart_resize
    from trainer.tiny_vlm import save_tiny_vlm

    load = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-vlm-"))
    shots = screenshots(6)
    vlm = save_tiny_vlm(work / "vlm")
    data = sft_rows(work / "rows", shots, args.rows)
    batch = 4096 // 2048  # rows a step in each process
    one = sft_figures(*train([], vlm, data, work / "one", args.steps, threads=1), processes=1, batch=batch)
    both = sft_figures(*train([], vlm, data, work / "both", args.steps, threads=2), processes=1, batch=batch)
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    two = sft_figures(*train(torchrun, vlm, data, work / "two", args.steps, threads=1), processes=2, batch=batch)
    per_row = image_tokens(vlm, shots[0])
    height, width = smart_resize(HEIGHT, WIDTH, factor=IMAGE_FACTOR, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    jpeg = [len(shot) for shot in shots]
    print(json.dumps({
        "machine": {"cpus": os.cpu_count(), "load_at_start": round(load, 2)},
        "screenshots": {"size": f"{WIDTH}x{HEIGHT}", "jpeg_quality": 80, "jpeg_bytes_mean": round(sum(jpeg) / len(jpeg)),
                        "data_uri_bytes_mean": round(sum(len("data:image/jpeg;base64,") + 4 * -(-n // 3)
                                                         for n in jpeg) / len(jpeg))},
        "sft": {"model": "tiny Qwen2.5-VL (text 64 wide, 2 layers; 2-block vision tower)", "rows": args.rows,
                "image_tokens_per_row": per_row,
                "one_process_one_thread": {**one, "image_tokens_per_step": per_row * batch},
                "one_process_two_threads": {**both, "image_tokens_per_step": per_row * batch},
                "two_processes_one_thread_each": {**two, "image_tokens_per_step": per_row * batch * 2},
                "rows_per_s_two_processes_over_one_thread": round(two["rows_per_s"] / one["rows_per_s"], 2),
                "rows_per_s_two_processes_over_two_threads": round(two["rows_per_s"] / both["rows_per_s"], 2)},
        "image_tokens_1280x800": {"resized": f"{width}x{height}", "tokens": (width // 28) * (height // 28)},
        "request_bytes": request_bytes(shots),
    }))


if __name__ == "__main__":
    main()
