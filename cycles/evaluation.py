"""Measuring checkpoints for a cycle: which eval episodes (the same seeds for the candidate and the deployed
checkpoint, in every cycle), and ``python -m trainer eval`` on them, stored as one Evaluation row each. An authored
eval task's JSON travels in the plan and reaches the trainer as a ``--task-defs`` file in the cycle's dir."""
from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from core.errors import ApplicationError
from cycles import cycle_settings
from cycles.models import Cycle, Evaluation
from projects.models import Project, Split, TaskSpec
from rollouts.models import Checkpoint
from training import deployments, trainer_process


# LOUPE_EVAL_PROCESSES=0: at most this many eval processes (each a policy, about 700 MB, and a browser)
AUTO_EVAL_PROCESSES = 4
PROGRESS_EVERY_SECONDS = 1.0  # how often a running evaluation writes its cycle's progress


class EvaluationFailed(ApplicationError):
    """An evaluation could not finish; ``log_tail`` is what the trainer said."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message, status=409)
        self.log_tail = log_tail


def eval_plan(project: Project, config: dict) -> list[dict]:
    """The eval episodes, the same for the candidate and the deployed checkpoint (and in every cycle): the first
    ``eval_seeds`` seeds of each eval task, grouped into one trainer call per (seeds, step limit)."""
    tasks = TaskSpec.objects.filter(project=project, split=Split.EVAL)
    if config["eval_tasks"]:
        tasks = tasks.filter(pk__in=config["eval_tasks"])
    tasks = list(tasks.order_by("task_name", "pk"))
    if not tasks:
        raise ApplicationError("This project has no eval-split task, so a candidate cannot be measured. Add a task "
                               "with split 'eval' and seeds no training episode uses.", status=409)
    groups: dict[tuple, dict] = {}
    for task in tasks:
        last = min(task.seed_end, task.seed_start + config["eval_seeds"] - 1)
        overlap = TaskSpec.objects.filter(project=project, split=Split.TRAIN, env_kind=task.env_kind,
                                          task_name=task.task_name, seed_start__lte=last, seed_end__gte=task.seed_start)
        if overlap.exists():
            train = overlap.first()
            raise ApplicationError(
                f"The eval seeds {task.seed_start}-{last} of {task.task_name} overlap the seeds {train.seed_start}-"
                f"{train.seed_end} its train task uses; move one range so that no snapshot holds an eval seed.",
                status=409)
        steps = config["eval_max_steps"] or task.max_steps
        key = (task.env_kind, task.seed_start, last, steps)
        group = groups.setdefault(key, {"env": task.env_kind, "seeds": f"{task.seed_start}-{last}",
                                        "max_steps": steps, "tasks": []})
        group["tasks"].append(task.task_name)
        if task.definition is not None:  # an authored task: the eval's env learns its JSON (--task-defs)
            group.setdefault("definitions", {})[task.task_name] = task.definition
    return list(groups.values())


def seed_count(spec: str) -> int:
    lo, _, hi = spec.partition("-")
    return int(hi or lo) - int(lo) + 1


def eval_prompting(cycle: Cycle, checkpoint: Checkpoint) -> dict:
    """The eval's options for prompting ``checkpoint`` as the rollout worker prompts a deployment of it
    (rollouts.worker.prompting_for): its record's action format and, when it reads screenshots, the
    project's ``history_images`` as the cycle froze them, so the candidate and the deployed checkpoint see the same."""
    options = {"action_format": checkpoint.action_format}
    if checkpoint.reads_images:
        history = cycle.config.get("history_images")
        options["history_images"] = history if history is not None else \
            cycle_settings.settings_of(cycle.project)["history_images"]
    return options


def evaluate_checkpoint(cycle: Cycle, checkpoint: Checkpoint, role: str, plan: list[dict], progress: tuple[int, int],
                        folder: Path) -> None:
    """Roll ``checkpoint`` out on the plan with `python -m trainer eval`; store one Evaluation row. The eval answers
    as a worker's policy does, with LOUPE_POLICY_THREADS torch threads: beside other busy processes, a thread a core
    made a cycle's evaluation ten times slower (README, Sizing). The plan's tasks are measured in
    :func:`eval_processes` processes at once (lanes, :func:`eval_lanes`), each task whole in one of them: greedy decoding
    on fixed seeds gives the same episodes in any process, so only the time changes."""
    if Evaluation.objects.filter(cycle=cycle, checkpoint=checkpoint).exists():
        return  # measured before the worker was killed: greedy decoding on fixed seeds gives the same numbers
    deployments.checkpoint_check_files(checkpoint.uri)
    offset, total = progress
    prompting = eval_prompting(cycle, checkpoint)
    if _reuse_earlier(cycle, checkpoint, role, plan, prompting, offset, total):
        return
    lanes = eval_lanes(plan, eval_processes(plan, checkpoint))
    runs, failure = _run_lanes(cycle, checkpoint, role, lanes, prompting, (offset, total), folder)
    if failure:
        raise EvaluationFailed(failure, "".join(log for lane in runs for _, _, log in lane))
    calls = [(group, metrics) for lane in runs for group, metrics, _ in lane]
    per_task = {task: metrics["per_task"][task] for group, metrics in calls for task in group["tasks"]}
    per_task = {task: per_task[task] for group in plan for task in group["tasks"]}  # the plan's order, as one lane's
    seeds = {task: group["seeds"] for group in plan for task in group["tasks"]}
    episodes = sum(metrics["overall"]["episodes"] for _, metrics in calls)
    # the evaluation's time: its longest lane (the lanes run side by side)
    seconds = max(sum(metrics.get("eval_seconds", 0.0) for _, metrics, _ in lane) for lane in runs)
    successes = sum(t["success_rate"] * t["episodes"] for t in per_task.values())
    rewards = sum(t["mean_reward"] * t["episodes"] for t in per_task.values())
    try:
        with transaction.atomic():
            Evaluation.objects.create(
                checkpoint=checkpoint, cycle=cycle, role=role, split=Split.EVAL, seeds=seeds, episodes=episodes,
                success_rate=successes / episodes if episodes else 0.0, mean_reward=rewards / episodes if episodes else 0.0,
                details={"per_task": per_task, "eval_seconds": round(seconds, 2), "plan": plan,
                         "prompting": prompting, "processes": len(lanes)})
    except IntegrityError:
        pass  # a duplicate task measured it at the same moment; the numbers are the same


def eval_processes(plan: list[dict], checkpoint: Checkpoint) -> int:
    """How many `trainer eval` processes measure ``checkpoint`` at once: LOUPE_EVAL_PROCESSES, or (0) as many as the
    machine's cores hold at LOUPE_POLICY_THREADS threads each, at most AUTO_EVAL_PROCESSES, and one for a checkpoint
    that reads screenshots (its copies would share one GPU); never more than the plan has tasks."""
    wanted = settings.LOUPE_EVAL_PROCESSES
    if wanted < 1:
        cores = os.cpu_count() or 1
        wanted = 1 if checkpoint.reads_images else \
            min(AUTO_EVAL_PROCESSES, max(1, cores // (settings.LOUPE_POLICY_THREADS or cores)))
    return max(1, min(wanted, sum(len(group["tasks"]) for group in plan)))


def eval_lanes(plan: list[dict], processes: int) -> list[list[dict]]:
    """The plan as ``processes`` lanes of trainer eval calls, each call a plan group with some of its tasks (and their
    definitions). Whole tasks, the most work first (episodes times the step limit) onto the lane with the least, so
    each task's figures come from one process and the lanes end about together; the same plan always splits the same
    way. One lane: the plan's groups as they are."""
    if processes <= 1:
        return [plan]
    units = sorted(((seed_count(group["seeds"]) * group["max_steps"], g, task)
                    for g, group in enumerate(plan) for task in group["tasks"]), key=lambda u: (-u[0], u[1], u[2]))
    work, placed = [0] * processes, [set() for _ in range(processes)]
    for cost, g, task in units:
        lane = work.index(min(work))
        placed[lane].add((g, task))
        work[lane] += cost
    lanes = []
    for units_of_lane in placed:
        calls = []
        for g, group in enumerate(plan):
            tasks = [task for task in group["tasks"] if (g, task) in units_of_lane]
            if tasks:
                call = {**group, "tasks": tasks}
                if group.get("definitions"):
                    call["definitions"] = {t: d for t, d in group["definitions"].items() if t in tasks}
                calls.append(call)
        if calls:
            lanes.append(calls)
    return lanes


def _run_lanes(cycle: Cycle, checkpoint: Checkpoint, role: str, lanes: list[list[dict]], prompting: dict,
               progress: tuple[int, int], folder: Path) -> tuple[list[list[tuple[dict, dict | None, str]]], str]:
    """Run each lane's trainer calls one after another, the lanes side by side (a thread each, waiting on its
    subprocess), while this thread writes the cycle's progress (the episodes every lane has done). Returns, per lane,
    per call made: (the call's group, its metrics.json or None where the call failed, its log); and the first
    failure's words ("" when none failed). A failed call ends its lane and stops the other lanes' subprocesses (their
    episodes would be measured for nothing)."""
    offset, total = progress
    done = [0] * len(lanes)
    started: list = []
    failures: list[str] = []  # the first is the failure; the lanes it stopped fail after it
    stop = threading.Event()

    def register(proc) -> None:
        started.append(proc)
        if stop.is_set():  # started as another lane failed: it stops at once too
            proc.terminate()

    def stop_all() -> None:
        stop.set()
        for proc in started:
            if proc.poll() is None:
                proc.terminate()

    def run_lane(index: int, calls: list[dict]) -> list[tuple[dict, dict | None, str]]:
        try:
            return lane_calls(index, calls)
        except BaseException:
            stop_all()  # an error of ours (an unreadable metrics.json, ...): the other lanes stop too
            raise

    def lane_calls(index: int, calls: list[dict]) -> list[tuple[dict, dict | None, str]]:
        made, finished = [], 0
        for c, group in enumerate(calls):
            if stop.is_set():
                break
            name = f"eval-{role}-{checkpoint.pk}-{c}" if len(lanes) == 1 else f"eval-{role}-{checkpoint.pk}-{index}-{c}"
            out = folder / name
            argv = trainer_process.command("eval", init=checkpoint.uri, out=str(out), tasks=",".join(group["tasks"]),
                                           seeds=group["seeds"], env=group["env"], max_episode_steps=group["max_steps"],
                                           task_defs=_task_defs(group, folder / f"{name}-tasks.json"),
                                           threads=settings.LOUPE_POLICY_THREADS or None, **prompting)

            def on_progress(item, finished=finished):
                done[index] = finished + item["step"]

            _, stderr, returncode = trainer_process.stream(argv, on_progress, on_start=register)
            log = f"$ {trainer_process.shown(argv)}\n{stderr}"
            if returncode != 0:
                failures.append(trainer_process.failure(f"eval of {checkpoint.name}", returncode, stderr))
                made.append((group, None, log))
                stop_all()
                break
            metrics = json.loads((out / "metrics.json").read_text())
            made.append((group, metrics, log))
            finished += metrics["overall"]["episodes"]
            done[index] = finished
        return made

    label = f"evaluating {role} {checkpoint.name}" + (f" ({len(lanes)} processes)" if len(lanes) > 1 else "")
    with ThreadPoolExecutor(len(lanes)) as pool:
        futures = [pool.submit(run_lane, i, calls) for i, calls in enumerate(lanes)]
        shown = None
        while True:
            waiting = wait(futures, timeout=PROGRESS_EVERY_SECONDS)[1]
            if sum(done) != shown:
                shown = sum(done)
                Cycle.objects.filter(pk=cycle.pk).update(progress={"done": offset + shown, "total": total,
                                                                   "label": label})
            if not waiting:
                break
    return [future.result() for future in futures], (failures[0] if failures else "")


def _task_defs(group: dict, path: Path) -> str:
    """The ``--task-defs`` file of a plan group's authored tasks (task name -> env kind and JSON), written to ``path``;
    "" (no option) when all its tasks are shipped ones."""
    if not group.get("definitions"):
        return ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({name: {"env_kind": group["env"], "definition": definition}
                                for name, definition in group["definitions"].items()}))
    return str(path)


def _reuse_earlier(cycle: Cycle, checkpoint: Checkpoint, role: str, plan: list[dict], prompting: dict, offset: int,
                   total: int) -> bool:
    """Store an earlier cycle's measurement of ``checkpoint`` as this cycle's when it ran exactly this plan (tasks,
    seeds, step limits) prompted the same way: greedy decoding on fixed seeds gives the same episodes, so the
    deployed checkpoint, measured as the candidate (or as deployed) in the cycle before, is not rolled out again.
    The row says which cycle measured it (``details.reused_from``)."""
    for earlier in Evaluation.objects.filter(checkpoint=checkpoint, cycle__project=cycle.project,
                                             split=Split.EVAL).exclude(cycle=cycle).select_related("cycle"):
        details = earlier.details or {}
        if details.get("plan") != plan or details.get("prompting") != prompting:
            continue
        try:
            with transaction.atomic():
                Evaluation.objects.create(
                    checkpoint=checkpoint, cycle=cycle, role=role, split=Split.EVAL, seeds=earlier.seeds,
                    episodes=earlier.episodes, success_rate=earlier.success_rate, mean_reward=earlier.mean_reward,
                    details={**details, "eval_seconds": 0.0, "reused_from": {
                        "cycle": earlier.cycle.iteration, "evaluation": earlier.pk,
                        "eval_seconds": details.get("eval_seconds")}})
        except IntegrityError:
            pass
        Cycle.objects.filter(pk=cycle.pk).update(progress={
            "done": offset + earlier.episodes, "total": total,
            "label": f"{role} {checkpoint.name}: measured on these seeds in cycle {earlier.cycle.iteration}"})
        return True
    return False
