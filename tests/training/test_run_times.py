"""What a manager reads of a training run (issue 34): its time in the queue apart from its training time, and a long
run's progress lines thinned for the chart with how much (metrics_every), never cut to its last lines."""
import datetime as dt
import json
import sys
import threading
import time

import pytest
from django.db import connection
from rest_framework.test import APIClient

from training import runs as training
from training.models import TrainingRun
from tests.factories import make_member, make_project, make_user

pytestmark = pytest.mark.django_db


def _runs(user, project) -> list[dict]:
    client = APIClient()
    client.force_authenticate(user)
    response = client.get(f"/api/v1/projects/{project.pk}/runs/")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_a_run_shows_its_time_in_the_queue_apart_from_its_training_time():
    project = make_project()
    manager = make_user("lead")
    make_member(project, manager, "manager")
    now = dt.datetime.now(dt.UTC)
    done = TrainingRun.objects.create(project=project, algorithm="sft", status="succeeded")
    TrainingRun.objects.filter(pk=done.pk).update(created_at=now - dt.timedelta(seconds=400),
                                                  started_at=now - dt.timedelta(seconds=300), finished_at=now)
    waiting = TrainingRun.objects.create(project=project, algorithm="sft", status="queued")
    TrainingRun.objects.filter(pk=waiting.pk).update(created_at=now - dt.timedelta(seconds=90))
    by_hand = TrainingRun.objects.create(project=project, algorithm="sft", status="succeeded")  # never queued
    runs = {r["id"]: r for r in _runs(manager, project)}
    assert (runs[done.pk]["queued_seconds"], runs[done.pk]["training_seconds"]) == (100.0, 300.0)
    assert runs[waiting.pk]["queued_seconds"] >= 90 and runs[waiting.pk]["training_seconds"] is None
    assert runs[by_hand.pk]["queued_seconds"] is None and runs[by_hand.pk]["training_seconds"] is None


def test_a_long_runs_curve_is_thinned_over_the_whole_run_and_says_how_much():
    """1,200 progress lines: the stored ones are halved past 500 (training.MAX_METRIC_POINTS), the answer carries at
    most 200 from the first to the last, each numbered, and metrics_every the widest gap between them."""
    project = make_project()
    manager = make_user("lead")
    make_member(project, manager, "manager")
    run = TrainingRun.objects.create(project=project, algorithm="sft", status="running")
    lines = [json.dumps({"step": n, "total": 1200, "loss": 1 / n}) for n in range(1, 1201)]
    script = f"for line in {lines!r}: print(line)\nprint('{{\"done\": true}}')"
    training._stream(run, [sys.executable, "-c", script], phase="sft", weight=(0.0, 1.0))
    assert 250 <= len(run.metrics) <= training.MAX_METRIC_POINTS
    [shown] = _runs(manager, project)
    steps = [m["step"] for m in shown["metrics"]]
    assert len(steps) <= 200 and steps[0] == 1 and steps[-1] == 1200 and steps == sorted(steps)
    assert shown["metrics_lines"] == 1200
    gaps = [b - a for a, b in zip(steps, steps[1:])]
    assert shown["metrics_every"] == max(gaps) > 1

    short = TrainingRun.objects.create(project=project, algorithm="sft", status="running")
    training._stream(short, [sys.executable, "-c", "\n".join(f"print('{line}')" for line in lines[:30])],
                     phase="sft", weight=(0.0, 1.0))
    shown = {r["id"]: r for r in _runs(manager, project)}[short.pk]
    assert [m["line"] for m in shown["metrics"]] == list(range(30))
    assert (shown["metrics_lines"], shown["metrics_every"]) == (30, 1)
    # a run from before the lines were numbered: the answer's own spacing
    TrainingRun.objects.filter(pk=short.pk).update(metrics=[{"step": n, "total": 300} for n in range(1, 301)])
    shown = {r["id"]: r for r in _runs(manager, project)}[short.pk]
    assert (len(shown["metrics"]), shown["metrics_lines"], shown["metrics_every"]) == (150, 300, 2)
    assert shown["metrics"][-1]["step"] == 300


@pytest.mark.django_db(transaction=True)  # read by another connection while it runs
def test_a_new_phases_first_line_is_stored_at_once_even_inside_a_burst(tmp_path):
    """The cold start's demonstrations end in a burst of lines, then SFT says "step 0" and trains for minutes before
    its next line: the Runs page must read SFT's line meanwhile, not the demonstrations' last."""
    project = make_project()
    run = TrainingRun.objects.create(project=project, algorithm="sft", status="running")
    gate = tmp_path / "go"
    lines = [json.dumps({"step": n, "total": 450, "phase": "demos"}) for n in range(10, 460, 10)]
    script = (f"import os, time\nfor line in {lines!r}: print(line, flush=True)\n"
              f"print('{{\"step\": 0, \"total\": 60, \"phase\": \"sft\"}}', flush=True)\n"
              f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\nprint('{{\"done\": true}}')")
    seen = {}

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            metrics = TrainingRun.objects.get(pk=run.pk).metrics
            if metrics and metrics[-1].get("phase") == "sft":
                seen["stored"] = metrics[-1]
                break
            time.sleep(0.05)
        gate.touch()
        connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    training._stream(run, [sys.executable, "-c", script], phase="sft", weight=(0.0, 1.0),
                     phases=training.COLDSTART_PHASES)
    watcher.join()
    assert seen.get("stored", {}).get("step") == 0, "SFT's first line was not stored while it trained"
