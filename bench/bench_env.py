"""Benchmark the envs: MiniWoB++ click-step latency and reset; the Linux desktop's start, reset,
screenshot, action and AT-SPI times and memory per desktop.

Run: ``.venv/bin/python bench/bench_env.py [--steps 100] [--resets 10] [--task click-button]
[--only miniwob|desktop]``. Prints one JSON object: MiniWoB's figures at the top level (as before),
the desktop's under ``"desktop"``. MiniWoB click steps hit an empty corner of the task area, so the
episode stays open and every step does the full work: mouse click, page state and elements, JPEG
screenshot. Desktop figures: ``start`` is a new display (Xvfb) plus its first session; ``reset``
an episode of a task that opens an app (new session, HOME, the app's window, screenshot and
elements); ``click_xtest`` one click through XTEST alone; ``step_click`` a whole env step
(click, settle, screenshot, AT-SPI elements); ``pool_reset_with_app`` / ``pool_reset_no_app`` a reset
with a warm desktop waiting (``LOUPE_DESKTOP_POOL=1``): the task's own setup and first observation, and
a task with no setup; memory is the X server and every session process (USS) with mousepad and
galculator open. ``live`` (both envs, and the webapp's in bench_webapp.py): the live view's frames (annotation/live_view.py)
while the screen changes: a frame's JPEG bytes, one ``live_frame`` call on an unchanged screen (Chromium: the 15 ms
pump of the screencast; desktop: the grab and compare), a call that returns a changed frame (``grab_changed``: the
desktop's grab and JPEG encode), from a change to its frame (``change_to_frame``), and the pictures a second the
live view sends at ``LOUPE_LIVE_FPS`` 3 on a screen changing every 50 ms, with their bytes a second.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.actions import Action  # noqa: E402
from agent.envs import make_env  # noqa: E402


def _summary(samples_ms: list[float]) -> dict:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 2), "p95_ms": round(p95, 2),
            "min_ms": round(ordered[0], 2)}


COLOURS = ["rgb(255, 0, 0)", "rgb(0, 160, 0)", "rgb(0, 0, 255)", "rgb(240, 200, 0)"]


def bench_live(env, change, rounds: int = 10, seconds: float = 3.0) -> dict:
    """The live view's figures on ``env`` (a reset one); ``change(i)`` changes its screen without a step."""
    from annotation.live_view import LiveView

    deadline = time.monotonic() + 5
    while env.live_frame() is None and time.monotonic() < deadline:
        pass
    unchanged, _ = _timed(env.live_frame, 20)
    latencies, sizes, changed_calls = [], [], []
    for i in range(rounds):
        before = env.live_frame().jpeg
        change(i)
        started = time.perf_counter()
        while True:
            call = time.perf_counter()
            frame = env.live_frame()
            if frame.jpeg != before or time.perf_counter() - started > 5:
                break
        changed_calls.append((time.perf_counter() - call) * 1000)
        latencies.append((time.perf_counter() - started) * 1000)
        sizes.append(len(frame.jpeg))
    sent: list[dict] = []
    view = LiveView(episode_id=0, env=env, fps=3, max_bytes=100_000, publish=lambda _, message: sent.append(message),
                    watchers=lambda _: 1)
    started, i = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        change(i)
        i += 1
        pause = view.tick()
        time.sleep(min(pause, 0.05))
    env.live_stop()
    pictures = [m for m in sent if m["jpeg_b64"]]
    return {
        "frame_jpeg_bytes": {"median": int(statistics.median(sizes)), "max": max(sizes)},
        "live_frame_unchanged": _summary(unchanged),
        "grab_changed": _summary(changed_calls),
        "change_to_frame": _summary(latencies),
        "fps_achieved": round(len(pictures) / seconds, 2),
        "bytes_per_second": int(view.bytes_sent / seconds),
    }


def _page_colour(env):
    """A change for bench_live on a Chromium env: the page's background colour."""
    return lambda i: env._page.evaluate(
        f"() => {{ (document.getElementById('area') || document.body).style.background = '{COLOURS[i % len(COLOURS)]}'; }}")


def bench_miniwob(args: argparse.Namespace) -> dict:
    env = make_env("miniwob")
    try:
        env.reset(args.task, 0)  # browser start and first page load are not measured
        fresh, in_page, steps = [], [], []
        for seed in range(args.resets):
            started = time.perf_counter()
            env.reset(args.task, seed)
            fresh.append((time.perf_counter() - started) * 1000)
        env.fresh_context = False
        env.reset(args.task, 0)
        for seed in range(args.resets):
            started = time.perf_counter()
            env.reset(args.task, seed)
            in_page.append((time.perf_counter() - started) * 1000)
        blank = Action("click", {"x": 150, "y": 205})
        for _ in range(args.steps):
            started = time.perf_counter()
            result = env.step(blank)
            steps.append((time.perf_counter() - started) * 1000)
            if result.done:
                env.reset(args.task, 0)
        screenshot_bytes = len(result.observation.screenshot)
        env.reset(args.task, 0)
        live = bench_live(env, _page_colour(env))
    finally:
        env.close()
    return {
        "task": args.task,
        "click_step": _summary(steps),
        "reset_fresh_context": _summary(fresh),
        "reset_in_page": _summary(in_page),
        "screenshot_jpeg_bytes": screenshot_bytes,
        "live": live,
    }


def _timed(fn, n: int) -> tuple[list[float], object]:
    samples, value = [], None
    for _ in range(n):
        started = time.perf_counter()
        value = fn()
        samples.append((time.perf_counter() - started) * 1000)
    return samples, value


def bench_desktop(args: argparse.Namespace) -> dict:
    import psutil

    from agent.envs.desktop import osworld
    from agent.envs.desktop.session import Desktop

    starts = []
    for _ in range(3):
        desktop = Desktop()
        started = time.perf_counter()
        try:
            desktop.start()
            desktop.new_session()
            starts.append((time.perf_counter() - started) * 1000)
        finally:
            desktop.close()
    env = make_env("desktop")
    try:
        env.reset("desktop-mousepad-write", 0)
        resets, _ = _timed(lambda: env.reset("desktop-mousepad-write", 0), args.resets)
        sessions, _ = _timed(env.desktop.new_session, args.resets)
        env.reset("desktop-mousepad-write", 0)
        osworld.run_setup([{"type": "launch", "parameters": {"command": ["galculator"]}}], env.desktop)
        time.sleep(0.5)
        shots, jpeg = _timed(env.desktop.screenshot, 50)
        walks, walk = _timed(env.desktop.accessibility_nodes, 10)
        blank = (1270, 710)  # the bare root window: a click there changes nothing
        clicks, _ = _timed(lambda: env._input.click(*blank), args.steps)
        steps, _ = _timed(lambda: env.step(Action("click", {"x": blank[0], "y": blank[1]})), 10)
        memory = env.desktop.memory_bytes()
        processes = len(env.desktop.session_processes())
        live = bench_live(env, _desktop_window(env))
    finally:
        env.close()
    pool_resets, pool_bare = _bench_pool(args.resets)
    available = psutil.virtual_memory().available
    return {
        "start": _summary(starts),
        "reset_with_app": _summary(resets),
        "reset_session_only": _summary(sessions),
        "screenshot_1280x720_jpeg": _summary(shots),
        "screenshot_jpeg_bytes": len(jpeg),
        "click_xtest": _summary(clicks),
        "step_click": _summary(steps),
        "pool_reset_with_app": _summary(pool_resets),
        "pool_reset_no_app": _summary(pool_bare),
        "atspi_walk": _summary(walks),
        "atspi_nodes": len(walk["nodes"]),
        "memory_per_desktop_mib": round(memory / 2**20, 1),
        "session_processes": processes,
        "desktops_per_8_gib": int(8 * 2**30 // memory),
        "desktops_in_available_memory": int(available // memory),
        "live": live,
    }


def _desktop_window(env):
    """A change for bench_live on the desktop: a window another program shows, its colour changing."""
    x = env.desktop.connect()  # with the display's cookie
    screen = x.screen()
    window = screen.root.create_window(40, 40, 300, 200, 0, screen.root_depth, override_redirect=True)
    window.map()
    pixels = [screen.default_colormap.alloc_color(*rgb).pixel
              for rgb in ((65535, 0, 0), (0, 40000, 0), (0, 0, 65535), (60000, 50000, 0))]

    def change(i: int) -> None:
        window.change_attributes(background_pixel=pixels[i % len(pixels)])
        window.clear_area()
        x.sync()

    return change


def _bench_pool(n: int) -> tuple[list[float], list[float]]:
    """Resets with a warm desktop waiting (LOUPE_DESKTOP_POOL=1): the episode's task alone (mousepad opening,
    screenshot, elements), and a task with no setup (what the warm desktop itself leaves to do)."""
    from agent.envs.desktop import OSWorldTask

    bare = OSWorldTask(id="bare", instruction="Nothing.", config=[], evaluator={"func": "infeasible"}, infeasible=True)
    env = make_env("desktop", pool=1, tasks={"bare": bare})

    def warm_reset(task: str) -> float:
        deadline = time.monotonic() + 30
        while env.pool.ready_count() < 1 and time.monotonic() < deadline:  # the recycled desktop is ready again
            time.sleep(0.05)
        started = time.perf_counter()
        env.reset(task, 0)
        return (time.perf_counter() - started) * 1000

    try:
        warm_reset("bare")
        with_app = [warm_reset("desktop-mousepad-write") for _ in range(n)]
        no_app = [warm_reset("bare") for _ in range(n)]
    finally:
        env.close()
    return with_app, no_app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--resets", type=int, default=10)
    parser.add_argument("--task", default="click-button")
    parser.add_argument("--only", choices=("miniwob", "desktop"))
    args = parser.parse_args()

    report: dict = {}
    if args.only != "desktop":
        report.update(bench_miniwob(args))
    if args.only != "miniwob":
        report["desktop"] = bench_desktop(args)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({**report, "cpu_count": os.cpu_count(), "load_average_1min": load}))


if __name__ == "__main__":
    main()
