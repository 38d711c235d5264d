"""OSWorld's own task files, as a team brings them: `python -m bench osworld --dir PATH` (or this file directly).

PATH is a folder of OSWorld task files, by domain as OSWorld's evaluation_examples/examples holds them (a folder a
domain). Each file is imported alone into a scratch project (as `tasks_import` would; its files refused by the
loader are counted, with why), then each imported task that can run here (its programs installed, no file it
downloads missing from the scratch project's file store: `--files DIR` uploads DIR's files first, matched by name)
is started with a scripted policy that does nothing (it ends at once with an empty answer), on one desktop. Per
domain it reports: files, imported, runnable, past setup, checker reached, the checker's score of doing nothing
(feasible tasks: it should be 0; infeasible ones score 0 without the FAIL answer), and the seconds setup took.
Prints a table to stderr and one JSON object to stdout; the scratch project is deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.django_setup import setup_django  # noqa: E402

setup_django(channel_prefix=f"bench{os.getpid()}")

from agent.envs.desktop import DesktopEnv  # noqa: E402
from agent.envs.desktop.osworld import load_task, missing_programs  # noqa: E402
from agent.policies.base import Policy, PolicyOutput  # noqa: E402
from agent.rollout import run_episode  # noqa: E402
from core.errors import ApplicationError  # noqa: E402
from projects import taskspec_exchange
from projects import taskspec_files  # noqa: E402
from projects.models import Project, TaskSpec  # noqa: E402


class DoNothing(Policy):
    """Ends the episode at once, having done nothing: what the checker pays for an untouched desktop."""

    name = "do-nothing"

    def act(self, messages, *, temperature=None):
        return PolicyOutput(text='Thought: I leave the desktop as it is.\nAction: finished(answer="")')


class _TimedEnv(DesktopEnv):
    """Records how long each reset (the task's setup) took."""

    def reset(self, task, seed):
        started = time.monotonic()
        try:
            return super().reset(task, seed)
        finally:
            self.setup_s = time.monotonic() - started


def _upload_dir(project: Project, folder: Path) -> int:
    """Store each file of ``folder`` for every file a task needs with its name."""
    from django.core.files.uploadedfile import SimpleUploadedFile

    by_name = {path.name: path for path in folder.rglob("*") if path.is_file()}
    stored = 0
    for task in project.tasks.all():
        for item in taskspec_files.task_needs(task):
            path = by_name.get(item.name)
            if path is not None:
                taskspec_files.project_file_upload(project=project, actor=None, url=item.url, path=item.path,
                                               upload=SimpleUploadedFile(path.name, path.read_bytes()))
                stored += 1
    return stored


def main(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True, type=Path, help="A folder of OSWorld task files, a folder a domain.")
    parser.add_argument("--files", type=Path, help="A folder of the files the tasks download, matched by name.")
    parser.add_argument("--limit", type=int, default=0, help="At most this many tasks run (0: all).")
    parser.add_argument("--domains", default="", help="Only these domains (comma-separated).")
    args = parser.parse_args(argv)
    paths = sorted(args.dir.rglob("*.json"))
    if args.domains:
        paths = [p for p in paths if p.parent.name in args.domains.split(",")]
    if not paths:
        raise SystemExit(f"{args.dir} holds no .json file")
    # a scratch project a domain: OSWorld reuses a task id across domains for different tasks (chrome's and
    # thunderbird's 030eeff7-...), and a project's task ids are unique
    projects: dict[str, Project] = {}

    def project_for(domain: str) -> Project:
        if domain not in projects:
            projects[domain] = Project.objects.create(name=f"bench osworld {domain} {uuid.uuid4().hex[:6]}",
                                                      slug=f"bench-osworld-{uuid.uuid4().hex[:8]}")
        return projects[domain]

    rows: dict[str, dict] = collections.defaultdict(lambda: collections.Counter())
    setup_times: dict[str, list[float]] = collections.defaultdict(list)
    details = []
    try:
        imported: list[tuple[str, TaskSpec]] = []
        for path in paths:
            domain = path.parent.name
            rows[domain]["files"] += 1
            try:
                [task] = taskspec_exchange.task_import(project=project_for(domain), actor=None, format="osworld",
                                                    files=[(str(path), path.read_bytes())])
            except ApplicationError as exc:
                details.append({"file": str(path), "imported": False, "problems": exc.errors.get("tasks")})
                continue
            rows[domain]["imported"] += 1
            imported.append((domain, task))
        if args.files:
            for project in projects.values():
                _upload_dir(project, args.files)
        env = _TimedEnv()
        ran = 0
        try:
            for domain, task in imported:
                loaded = load_task(task.definition)
                row = rows[domain]
                if loaded.files:
                    row["need files"] += 1
                refusal = taskspec_files.start_refusal(task)
                lacking = missing_programs(loaded)
                detail = {"domain": domain, "task": task.task_name, "infeasible": loaded.infeasible,
                          "person": loaded.person}
                if refusal or lacking:
                    detail["not run"] = refusal or f"not installed: {', '.join(lacking)}"
                    details.append(detail)
                    continue
                if args.limit and ran >= args.limit:
                    continue
                ran += 1
                row["runnable"] += 1
                env.add_task(task.definition, files=taskspec_files.files_for_task(task))
                env.setup_s = None
                result = run_episode(env, DoNothing(), task=task.task_name, seed=0, max_steps=1)
                past_setup = bool(result.steps)
                detail.update(end=result.end_reason, error=result.error, setup_s=env.setup_s,
                              notes=list(env.desktop.notes) if env.desktop else [])
                if past_setup:
                    row["past setup"] += 1
                    setup_times[domain].append(env.setup_s)
                if result.end_reason == "finished":
                    row["checker reached"] += 1
                    verdict = (result.steps[-1].info or {}).get("verdict")
                    detail["score"] = None if verdict == "person" else result.reward
                    if verdict == "person":
                        row["person judged"] += 1
                    elif loaded.infeasible:
                        row["infeasible"] += 1
                        row["infeasible score>0"] += result.reward > 0
                    else:
                        row["feasible"] += 1
                        row["feasible score>0"] += result.reward > 0
                        row["feasible score sum"] += result.reward
                details.append(detail)
                print(f"{domain} {task.task_name[:8]}: {result.end_reason} {detail.get('score')} "
                      f"setup {env.setup_s or 0:.1f}s {result.error or ''}"[:300], file=sys.stderr)
        finally:
            env.close()
    finally:
        for project in projects.values():
            project.delete()
    table = {}
    for domain in sorted(rows):
        row, times = rows[domain], setup_times[domain]
        table[domain] = {**{k: row[k] for k in ("files", "imported", "need files", "runnable", "past setup",
                                                "checker reached", "feasible", "feasible score>0", "infeasible",
                                                "infeasible score>0", "person judged")},
                         "feasible mean score": round(row["feasible score sum"] / row["feasible"], 3)
                         if row["feasible"] else None,
                         "setup s median": round(statistics.median(times), 1) if times else None,
                         "setup s max": round(max(times), 1) if times else None}
    total = collections.Counter()
    for values in table.values():
        total.update({k: v for k, v in values.items() if isinstance(v, int) and not k.startswith("setup s")})
    all_times = [t for times in setup_times.values() for t in times]
    table["total"] = {**total, "setup s median": round(statistics.median(all_times), 1) if all_times else None,
                      "setup s max": round(max(all_times), 1) if all_times else None}
    _print_table(table)
    return {"table": table, "tasks": details}


def _print_table(table: dict) -> None:
    columns = ("files", "imported", "need files", "runnable", "past setup", "checker reached", "feasible",
               "feasible score>0", "infeasible", "person judged", "setup s median", "setup s max")
    width = max(len(name) for name in table)
    print("domain".ljust(width) + "".join(f"  {c:>9}" if len(c) <= 9 else f"  {c}" for c in columns), file=sys.stderr)
    for name, values in table.items():
        cells = "".join(f"  {str(values.get(c) if values.get(c) is not None else '-'):>{max(9, len(c))}}"
                        for c in columns)
        print(name.ljust(width) + cells, file=sys.stderr)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1, default=str))
