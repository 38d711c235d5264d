"""Benchmark the MiniWoB++ env: click-step latency (screenshot and elements included) and reset.

Run: ``.venv/bin/python bench/bench_env.py [--steps 100] [--resets 10] [--task click-button]``.
Prints one JSON object. Click steps hit an empty corner of the task area, so the episode stays
open and every step does the full work: mouse click, page state and elements, JPEG screenshot.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--resets", type=int, default=10)
    parser.add_argument("--task", default="click-button")
    args = parser.parse_args()

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
    finally:
        env.close()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({
        "task": args.task,
        "click_step": _summary(steps),
        "reset_fresh_context": _summary(fresh),
        "reset_in_page": _summary(in_page),
        "screenshot_jpeg_bytes": screenshot_bytes,
        "cpu_count": os.cpu_count(),
        "load_average_1min": load,
    }))


if __name__ == "__main__":
    main()
