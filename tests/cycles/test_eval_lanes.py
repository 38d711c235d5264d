"""A cycle measures a checkpoint in several `trainer eval` processes at once (cycles/evaluation.py): the plan's whole
tasks split into lanes, the lanes side by side, one Evaluation row as from one process; a failed lane stops the others.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cycles import evaluation
from cycles.models import Cycle, CycleState, Evaluation
from tests.factories import make_project, make_tiny_checkpoint
from training import trainer_process

PLAN = [{"env": "miniwob", "seeds": "100000-100009", "max_steps": 8,
         "tasks": ["click-button", "click-dialog", "click-link", "enter-text"]},
        {"env": "webapp", "seeds": "0-0", "max_steps": 10, "tasks": ["shop-add-earbuds"],
         "definitions": {"shop-add-earbuds": {"site": "shop", "goal": "earbuds"}}}]


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_plan_splits_into_lanes_of_whole_tasks_balanced_by_work_and_always_the_same_way():
    lanes = evaluation.eval_lanes(PLAN, 2)
    assert lanes == evaluation.eval_lanes(PLAN, 2)
    tasks = [[task for call in lane for task in call["tasks"]] for lane in lanes]
    assert sorted(sum(tasks, [])) == sorted(PLAN[0]["tasks"] + PLAN[1]["tasks"])  # every task once, none split
    assert tasks == [["click-button", "click-link", "shop-add-earbuds"], ["click-dialog", "enter-text"]]  # 170 and 160
    shop = next(call for lane in lanes for call in lane if call["env"] == "webapp")
    assert shop == PLAN[1]  # its seeds, steps and definition travel with it
    assert all(call.get("definitions") is None for lane in lanes for call in lane if call["env"] == "miniwob")
    assert evaluation.eval_lanes(PLAN, 1) == [PLAN]
    assert len(evaluation.eval_lanes(PLAN, 5)) == 5 and len(evaluation.eval_lanes(PLAN, 9)) == 5


def test_how_many_processes_follows_the_setting_the_cores_and_what_the_checkpoint_reads(settings, monkeypatch):
    text, vision = SimpleNamespace(reads_images=False), SimpleNamespace(reads_images=True)
    settings.LOUPE_EVAL_PROCESSES, settings.LOUPE_POLICY_THREADS = 3, 1
    assert evaluation.eval_processes(PLAN, text) == 3 and evaluation.eval_processes(PLAN, vision) == 3
    assert evaluation.eval_processes(PLAN[1:], text) == 1  # never more than the plan's tasks
    settings.LOUPE_EVAL_PROCESSES = 0
    monkeypatch.setattr(evaluation.os, "cpu_count", lambda: 2)
    assert evaluation.eval_processes(PLAN, text) == 2 and evaluation.eval_processes(PLAN, vision) == 1
    monkeypatch.setattr(evaluation.os, "cpu_count", lambda: 32)
    assert evaluation.eval_processes(PLAN, text) == evaluation.AUTO_EVAL_PROCESSES
    settings.LOUPE_POLICY_THREADS = 16
    assert evaluation.eval_processes(PLAN, text) == 2
    settings.LOUPE_POLICY_THREADS = 0  # torch's default: every core to one process
    assert evaluation.eval_processes(PLAN, text) == 1


@pytest.fixture
def measured(db, tmp_path, settings):
    """A project's cycle, its deployed tiny checkpoint and the two-lane plan of click-button and click-dialog."""
    settings.LOUPE_EVAL_PROCESSES = 2
    project = make_project()
    checkpoint = make_tiny_checkpoint(project, tmp_path / "ckpt")
    cycle = Cycle.objects.create(project=project, iteration=1, config={})
    plan = [{"env": "miniwob", "seeds": "100000-100001", "max_steps": 2, "tasks": ["click-button", "click-dialog"]}]
    return SimpleNamespace(cycle=cycle, checkpoint=checkpoint, plan=plan, folder=tmp_path / "cycle")


@pytest.mark.django_db
def test_two_lanes_run_side_by_side_and_store_one_evaluation_as_one_process_would(measured, monkeypatch):
    both_running = threading.Barrier(2, timeout=30)  # each lane's trainer waits for the other's: side by side or stuck
    rates = {"click-button": 1.0, "click-dialog": 0.5}

    def trainer(argv, on_progress, on_start=None):
        both_running.wait()
        (task,) = _option(argv, "--tasks").split(",")
        on_progress({"step": 1, "total": 2})
        out = Path(_option(argv, "--out"))
        out.mkdir(parents=True)
        per_task = {"episodes": 2, "success_rate": rates[task], "mean_reward": rates[task], "mean_steps": 1.5,
                    "void_rate": 0.0}
        (out / "metrics.json").write_text(json.dumps({
            "per_task": {task: per_task}, "overall": {"episodes": 2}, "eval_seconds": 10.0 if task == "click-button" else 4.0}))
        return {"done": True}, f"evaluated {task}\n", 0

    monkeypatch.setattr(trainer_process, "stream", trainer)
    evaluation.evaluate_checkpoint(measured.cycle, measured.checkpoint, "candidate", measured.plan, (0, 8),
                                   measured.folder)

    stored = Evaluation.objects.get(cycle=measured.cycle)
    assert (stored.episodes, stored.success_rate, stored.seeds) == \
        (4, 0.75, {"click-button": "100000-100001", "click-dialog": "100000-100001"})
    assert list(stored.details["per_task"]) == ["click-button", "click-dialog"]  # the plan's order
    assert stored.details["processes"] == 2 and stored.details["eval_seconds"] == 10.0  # the longer lane's time
    progress = Cycle.objects.get(pk=measured.cycle.pk).progress
    assert progress == {"done": 4, "total": 8, "label": f"evaluating candidate {measured.checkpoint.name} (2 processes)"}


@pytest.mark.django_db
def test_a_failed_lane_stops_the_other_and_the_cycle_is_told_why(measured, monkeypatch):
    other: list[subprocess.Popen] = []

    def trainer(argv, on_progress, on_start=None):
        if _option(argv, "--tasks") == "click-button":
            time.sleep(1)  # the other lane's trainer is running by now
            return {}, "Traceback ...\nerror: the page of click-button did not load\n", 2
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        on_start(proc)
        other.append(proc)
        return {}, "", proc.wait()

    monkeypatch.setattr(trainer_process, "stream", trainer)
    started = time.monotonic()
    with pytest.raises(evaluation.EvaluationFailed) as failed:
        evaluation.evaluate_checkpoint(measured.cycle, measured.checkpoint, "deployed", measured.plan, (0, 4),
                                       measured.folder)
    assert time.monotonic() - started < 60  # not the other lane's two minutes
    assert other[0].returncode is not None and other[0].returncode < 0  # stopped, by a signal
    assert failed.value.message == (f"trainer eval of {measured.checkpoint.name} exited with 2: error: the page of "
                                    "click-button did not load")
    assert "error: the page of click-button did not load" in failed.value.log_tail
    assert not Evaluation.objects.filter(cycle=measured.cycle).exists()


@pytest.mark.django_db
def test_real_trainers_in_two_lanes_measure_what_one_process_measures(measured, settings):
    """The tiny checkpoint rolled out in the real MiniWoB env by two `trainer eval` processes at once and by one:
    the same episodes, so the same figures."""
    evaluation.evaluate_checkpoint(measured.cycle, measured.checkpoint, "candidate", measured.plan, (0, 4),
                                   measured.folder)
    two = Evaluation.objects.get(cycle=measured.cycle)
    two.delete()  # else the next cycle would reuse this measurement of the same plan instead of rolling out
    Cycle.objects.filter(pk=measured.cycle.pk).update(state=CycleState.REJECTED)  # one running cycle a project
    again = Cycle.objects.create(project=measured.cycle.project, iteration=2, config={})
    settings.LOUPE_EVAL_PROCESSES = 1
    evaluation.evaluate_checkpoint(again, measured.checkpoint, "candidate", measured.plan, (0, 4),
                                   measured.folder / "one")
    one = Evaluation.objects.get(cycle=again)

    def figures(row):  # all but how long the model took to answer; MiniWoB's reward shrinks a little with the seconds
        # an episode took (1e-7 apart between runs of SmolLM2), so it is compared to 4 places
        return {task: {k: round(v, 4) if k == "mean_reward" else v for k, v in metrics.items() if k != "proposal_ms"}
                for task, metrics in row.details["per_task"].items()}

    assert (two.details["processes"], one.details["processes"]) == (2, 1)
    assert (two.episodes, two.success_rate, figures(two)) == (one.episodes, one.success_rate, figures(one))
    assert two.mean_reward == pytest.approx(one.mean_reward, abs=1e-4)
    assert two.episodes == 4 and set(figures(two)) == {"click-button", "click-dialog"}
    assert sorted(p.name for p in measured.folder.iterdir() if p.is_dir()) == \
        [f"eval-candidate-{measured.checkpoint.pk}-0-0", f"eval-candidate-{measured.checkpoint.pk}-1-0", "one"]
