"""Benchmark the webapp env on the django-oscar shop: database copy, server start, reset, screenshot and steps.

Run: ``.venv/bin/python bench/bench_webapp.py [--resets 5] [--steps 20]`` (or ``python -m bench webapp``).
Prints one JSON object: ``db_copy`` the golden SQLite copy alone; ``server_start`` a new shop server
process until it answers (Django and oscar imported, database checked); ``reset`` a whole episode start
(database copy, new browser context, first page load of the catalogue, screenshot and elements);
``screenshot`` one JPEG of the 1280x720 viewport through CDP; ``observe`` elements and screenshot;
``step_type`` a type action (no navigation); ``step_click_nav`` a click on a link that loads a category
page (settle, load, observation); ``server_rss_mib`` the shop server's memory after those pages;
``solution_<task>`` a whole scripted solution, reset included; ``wiki_reset`` an episode start on the MediaWiki
wiki (its SQLite files copied, a page loaded), where MediaWiki is installed.
The site is built first if needed (not measured). The load average is reported beside: on a busy 2-core
machine the page loads (oscar renders a catalogue page in about 150 queries) dominate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.actions import Action  # noqa: E402
from agent.envs import make_env  # noqa: E402
from agent.envs.webapp import sites  # noqa: E402
from agent.envs.webapp.solutions import solution_for  # noqa: E402
from bench.bench_env import _page_colour, _summary, bench_live  # noqa: E402  (the same figures as the desktop and MiniWoB bench)




def _timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resets", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    golden, _ = sites.build_oscar(quiet=True)
    report: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "db.sqlite3"
        report["db_copy"] = _summary(_timed(lambda: sites.copy_database(golden / "golden.sqlite3", target), 20))

        def start_stop() -> None:
            server = sites.ShopServer(data=golden, db=target)
            server.start()
            server.stop()

        report["server_start"] = _summary(_timed(start_stop, 3))

    env = make_env("webapp")
    try:
        env.reset("shop-add-to-basket", 0)  # browser and server start, not measured
        report["reset"] = _summary(_timed(lambda: env.reset("shop-add-to-basket", 0), args.resets))
        report["screenshot"] = _summary(_timed(env._screenshot, args.steps))
        report["observe"] = _summary(_timed(env._observe_page, args.steps))
        env.reset("shop-price-answer", 0)
        search = next(e for e in env._observe_page().elements if e.role == "textbox")
        env.step(Action("click", {"x": search.x, "y": search.y}))
        report["step_type"] = _summary(_timed(lambda: env.step(Action("type", {"text": "a"})), args.steps))
        clicks = []
        for _ in range(max(1, args.resets)):
            obs = env.reset("shop-add-to-basket", 0)
            link = next(e for e in obs.elements if e.role == "link" and e.text == "Audio")
            started = time.perf_counter()
            result = env.step(Action("click", {"x": link.x, "y": link.y}))
            clicks.append((time.perf_counter() - started) * 1000)
            assert "/catalogue/category/electronics/audio" in result.observation.url, result.observation.url
        report["step_click_nav"] = _summary(clicks)
        import psutil  # one of Loupe's requirements

        server = psutil.Process(env.server_pid)
        report["server_rss_mib"] = round(sum(p.memory_info().rss for p in [server, *server.children(True)]) / 2**20, 1)
        env.reset("shop-add-to-basket", 0)
        report["live"] = bench_live(env, _page_colour(env))  # the live view of a 1280x720 shop page
        for task in ("shop-add-to-basket", "shop-guest-checkout"):
            started, steps = time.perf_counter(), 0
            obs, solution = env.reset(task, 0), solution_for(task)
            while True:
                result = env.step(solution.next_action(obs))
                obs, steps = result.observation, steps + 1
                if result.done:
                    break
            report[f"solution_{task}"] = {"seconds": round(time.perf_counter() - started, 2), "steps": steps,
                                          "reward": result.reward}
        if not sites.wiki_missing():
            env.reset("wiki-open-page", 0)  # the wiki's build and server start, not measured
            report["wiki_reset"] = _summary(_timed(lambda: env.reset("wiki-open-page", 0), args.resets))
            started, steps = time.perf_counter(), 0
            obs, solution = env.reset("wiki-edit-page", 0), solution_for("wiki-edit-page")
            while True:
                result = env.step(solution.next_action(obs))
                obs, steps = result.observation, steps + 1
                if result.done:
                    break
            report["solution_wiki-edit-page"] = {"seconds": round(time.perf_counter() - started, 2), "steps": steps,
                                                 "reward": result.reward}
    finally:
        env.close()
    print(json.dumps({**report, "cpu_count": os.cpu_count(), "load_average_1min": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
