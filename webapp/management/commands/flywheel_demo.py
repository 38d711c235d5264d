"""The flywheel, shown on a running Loupe (`make run`): simulated annotators supervise episodes through the REST and
WebSocket API, then a cycle trains, evaluates and deploys on their data; repeated. Watch the project's Cycles page.
After each cycle it prints the deployed checkpoint's held-out success (from the cold-start v0 of `make run` on), on
the old tasks (v0's three) and on the new ones (tasks v0 was not trained on), the rows and the seconds.

    python manage.py flywheel_demo --url http://127.0.0.1:8000 --project demo --cycles 3
"""
import json
import os
import random
import time

from django.core.management.base import BaseCommand, CommandError

from demo.simulated_annotators import Api, ApiFailure, annotate, cycle_figures, cycle_run, episode_shares, in_turn
from training.runs import COLDSTART
from webapp.demo import DEMO_AUTHORED_EVAL, DEMO_AUTHORED_TEACHER, DEMO_AUTHORED_TEACHERS, demo_password

OLD_TASKS = ("click-button", "click-link", "focus-text")  # v0's (trainer/coldstart.py TASKS)


class Command(BaseCommand):
    help = ("Simulated annotators steer supervised episodes through the API of a running Loupe, then a flywheel "
            "cycle trains on their data; printed as JSON figures per cycle.")

    def add_arguments(self, parser):
        parser.add_argument("--url", default=f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}")
        parser.add_argument("--project", default="demo", help="Project slug.")
        parser.add_argument("--manager", default="manager", help="Who runs the cycles (a manager of the project).")
        parser.add_argument("--annotators", default="annotator", help="Comma-separated annotators of the project.")
        parser.add_argument("--password", default="", help="Their password (default: the demo password).")
        parser.add_argument("--tasks", default="", help="Comma-separated train tasks to annotate (default: the "
                                                        "project's eval tasks' names that also have a train task, and "
                                                        f"{DEMO_AUTHORED_TEACHER} when the demo's authored shop task "
                                                        f"{DEMO_AUTHORED_EVAL['task_id']} is held out).")
        parser.add_argument("--episodes", type=int, default=24, help="Supervised episodes before each cycle (a "
                                                                     "shop task's share is at most 2: it has one "
                                                                     "episode, whatever the seed).")
        parser.add_argument("--cycles", type=int, default=3)
        parser.add_argument("--cycle-timeout", type=float, default=4 * 3600,
                            help="Seconds to follow a cycle before giving up on it (it goes on in Loupe): on a busy "
                                 "2-core machine a cycle's training and evaluation took 50 minutes.")
        parser.add_argument("--wait", type=float, default=3600, help="Seconds to wait for the project's cold start "
                                                                      "(v0) when no trained policy is deployed yet, "
                                                                      "as on make run's first start (0: do not wait).")

    def handle(self, *args, url, project, manager, annotators, password, tasks, episodes, cycles, wait, cycle_timeout,
               **options):
        if not password:
            password = demo_password()[0]
        try:
            lead = Api(url, manager, password)
            found = [p for p in lead.call("GET", "/api/v1/projects/")["results"] if p["slug"] == project]
            if not found:
                raise CommandError(f"{manager} is not a member of a project '{project}' at {url}.")
            pid = found[0]["id"]
            specs = lead.call("GET", f"/api/v1/projects/{pid}/tasks/?page_size=200")["results"]
            train = {t["task_name"]: t for t in specs if t["split"] == "train"}
            held = [t["task_name"] for t in specs if t["split"] == "eval"]
            wanted = [t.strip() for t in tasks.split(",") if t.strip()] or [t for t in held if t in train] + \
                ([DEMO_AUTHORED_TEACHER] if DEMO_AUTHORED_EVAL["task_id"] in held else [])
            missing = [t for t in wanted if t not in train]
            if not wanted or missing:
                raise CommandError(f"No train task {', '.join(missing) or '(none given)'} in {project}; pass --tasks.")
            try:
                split = episode_shares(episodes, wanted, OLD_TASKS)  # a new task three times an old one's share
            except ValueError as exc:
                raise CommandError(f"--episodes: {exc} ({', '.join(wanted)}).") from None
            groups = {"old": [t for t in held if t in OLD_TASKS], "new": [t for t in held if t not in OLD_TASKS]}
            people = [a.strip() for a in annotators.split(",") if a.strip()]
            # people correct the deployed policy's own steps: until a trained one is deployed there is nothing of
            # the model's to correct (and a cycle is refused)
            deployed = self._wait_for_a_trained_policy(lead, pid, project, wait)
            self._say(f"the deployed policy is {deployed['checkpoint']['name']}.")
            rng = random.Random()
            teachers = [t for t in DEMO_AUTHORED_TEACHERS if t in train]
            for n in range(cycles):
                started, reports = time.monotonic(), []
                for name, share in split.items():
                    task = train[name]
                    span = range(task["seed_start"], task["seed_end"] + 1)
                    # a task of one seed (a web app's: the seed changes nothing) is annotated at most twice a cycle
                    seeds = rng.sample(span, share) if len(span) >= share else [span[0]] * min(share, 2)
                    if name == DEMO_AUTHORED_TEACHER and len(teachers) > 1:
                        # the shop's products in turn, one an episode: what carries to the held-out product is the
                        # step itself, not one product's name
                        picks = in_turn(teachers, n, len(seeds))
                        self._say(f"cycle {n + 1}: {len(people)} annotator(s) supervise {len(picks)} shop episodes "
                                  f"({', '.join(picks)})…")
                        for pick in picks:
                            reports += annotate(url, people, password, pid, train[pick], [train[pick]["seed_start"]])
                        continue
                    self._say(f"cycle {n + 1}: {len(people)} annotator(s) supervise {len(seeds)} {name} episodes…")
                    reports += annotate(url, people, password, pid, task, seeds)
                spent = time.monotonic() - started
                self._say(f"cycle {n + 1}: running a flywheel cycle (see the Cycles page)…")
                cycle = cycle_run(lead, pid, timeout=cycle_timeout,
                                  on_progress=lambda c, n=n: self._say(f"cycle {n + 1}: {_stage(c)}…"))
                figures = cycle_figures(cycle, reports, spent, groups)
                self._say(json.dumps(figures))
                after = figures["after"] if cycle["state"] == "deployed" else figures["before"]
                deployed = lead.call("GET", f"/api/v1/projects/{pid}/deployments/")["results"][0]["checkpoint"]["name"]
                self._say(f"cycle {n + 1}: {cycle['state']}; the deployed {deployed} scores "
                          f"{_percent(after['all'])} on the held-out seeds (old tasks {_percent(after['old'])}, "
                          f"new {_percent(after['new'])}); rows {figures['rows']}; annotation {spent:.0f} s, "
                          f"cycle {figures['cycle_seconds']:.0f} s"
                          + (f" ({cycle['decision']})" if cycle["decision"] else ""))
        except ApiFailure as exc:
            raise CommandError(str(exc)) from None

    def _say(self, line: str) -> None:
        """A line now, also into a file or a pipe (where stdout waits for a full buffer): each takes minutes."""
        self.stdout.write(line)
        self.stdout.flush()

    def _wait_for_a_trained_policy(self, lead: Api, pid: int, project: str, wait: float) -> dict:
        """The project's active deployment of a trained policy, waiting up to `wait` seconds for its cold start (the
        run that deploys v0) while only the scripted baseline is deployed; progress every 30 s."""
        deadline, shown = time.monotonic() + wait, 0.0
        while True:
            active = [d for d in lead.call("GET", f"/api/v1/projects/{pid}/deployments/")["results"] if d["active"]]
            if active and active[0]["backend"] != "scripted":
                return active[0]
            runs = lead.call("GET", f"/api/v1/projects/{pid}/runs/")["results"]
            cold = next((r for r in runs if _is_coldstart(r)), None)  # the newest
            if cold is None:
                raise CommandError(f"No trained policy is deployed in {project} and no cold start is queued: deploy "
                                   "a checkpoint on the project's Runs page (make run queues the demo project's "
                                   "cold start on its first start).")
            if cold["status"] in ("failed", "cancelled"):
                raise CommandError(f"No trained policy is deployed in {project}: its cold start (run {cold['id']}) "
                                   f"{cold['status']}" + (f": {cold['error']}" if cold.get("error") else "") +
                                   ". Starting Loupe again (make run) queues a new one; see the project's Runs page.")
            now, percent = time.monotonic(), (cold.get("progress") or 0) * 100
            if now >= deadline:
                raise CommandError(f"No trained policy is deployed in {project} after {wait:.0f} s: its cold start "
                                   f"(run {cold['id']}) is {cold['status']} at {percent:.0f} %. Run this again when "
                                   "it is deployed, or pass a longer --wait.")
            if now >= shown:
                self._say(f"waiting for v0, the cold start (run {cold['id']}): {cold['status']}, {percent:.0f} % "
                          f"({cold.get('queued_seconds') or 0:.0f} s in the queue, "
                          f"{cold.get('training_seconds') or 0:.0f} s training)…")
                shown = now + 30
            time.sleep(min(5.0, max(0.1, deadline - now)))


def _stage(cycle: dict) -> str:
    """Where a running cycle is, in words: its state and, where it reports one, its progress."""
    progress = cycle.get("progress") or {}
    done, total = progress.get("done"), progress.get("total")
    where = progress.get("label") or ""
    if done is not None and total:
        where += f" ({done} of {total})"
    return f"{cycle['state']}" + (f", {where}" if where else "")


def _is_coldstart(run: dict) -> bool:
    stages = (run.get("config") or {}).get("stages") or [{}]
    return stages[0].get("algorithm") == COLDSTART


def _percent(rate) -> str:
    return "n/a" if rate is None else f"{rate * 100:.0f} %"
