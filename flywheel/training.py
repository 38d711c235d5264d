"""Training runs: the `train` worker runs the trainer's CLI as a subprocess and turns its JSON
progress lines into live progress on the TrainingRun row (and events the browser can follow)."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from flywheel.models import Project, RunStatus, TrainingRun
from core.errors import ApplicationError

log = logging.getLogger(__name__)

LOG_TAIL_CHARS = 20_000
MAX_METRIC_POINTS = 500


def run_dir(run: TrainingRun) -> Path:
    return settings.LOUPE_CHECKPOINT_DIR / f"project-{run.project_id}" / f"run-{run.pk}"


# The cold start's recipe lives with the trainer (trainer/coldstart.py, `python -m trainer coldstart`); a run
# records only what the environment changes of it (the tests shrink it), and the trainer fills in the rest.
COLDSTART_ENV = {"seeds": "LOUPE_COLDSTART_SEEDS", "max_steps": "LOUPE_COLDSTART_STEPS",
                 "max_seconds": "LOUPE_COLDSTART_SECONDS"}


@transaction.atomic
def coldstart_run_create(*, project: Project) -> TrainingRun:
    """Checkpoint v0: SFT from the tiny model on scripted demonstrations, queued on the `train` worker."""
    from flywheel import tasks

    options = {key: os.environ[name] for key, name in COLDSTART_ENV.items() if os.environ.get(name)}
    run = TrainingRun.objects.create(project=project, algorithm="sft",
                                     config={"coldstart": True, "options": options, "deploy_as": "v0"})
    transaction.on_commit(lambda: tasks.training_run_execute.delay(run.pk))
    return run


ALGORITHM_FOR_KIND = {"sft": "sft", "ct": "sft", "dpo": "dpo", "rl": "rl"}


# A few rows trained for hundreds of steps are memorised, and the model forgets what it knew: runs on
# snapshots stop after this many passes over the rows unless asked otherwise (the trainer says so).
DEFAULT_MAX_EPOCHS = 5


@transaction.atomic
def run_create(*, project: Project, snapshot, algorithm: str | None = None, init_checkpoint=None,
               max_steps: int | None = None, max_epochs: int = DEFAULT_MAX_EPOCHS, actor=None) -> TrainingRun:
    """A training run on a ready snapshot (SFT for sft/ct rows, DPO for pairs, RL for episodes), from the
    given checkpoint or else the deployed one, queued on the `train` worker."""
    from flywheel import tasks
    from flywheel.models import SnapshotStatus
    from core.audit import audit_record

    if snapshot.project_id != project.pk:
        raise ApplicationError("That snapshot belongs to another project.", status=404)
    if snapshot.status != SnapshotStatus.READY:
        raise ApplicationError(f"Snapshot {snapshot.pk} is {snapshot.status}; train on a ready snapshot.", status=409)
    algorithm = algorithm or ALGORITHM_FOR_KIND[snapshot.kind]
    if algorithm != ALGORITHM_FOR_KIND[snapshot.kind]:
        raise ApplicationError(f"A {snapshot.kind} snapshot trains with {ALGORITHM_FOR_KIND[snapshot.kind]}, not {algorithm}.",
                               errors={"algorithm": ["Does not fit the snapshot's rows."]})
    if init_checkpoint is None:
        deployment = project.deployments.filter(active=True).select_related("checkpoint").first()
        init_checkpoint = deployment.checkpoint if deployment and deployment.checkpoint.uri and \
            Path(deployment.checkpoint.uri).is_dir() else None
    elif init_checkpoint.project_id != project.pk:
        raise ApplicationError("That checkpoint belongs to another project.", status=404)
    config = {**({"max_steps": max_steps} if max_steps else {}),
              **({"max_epochs": max_epochs} if max_epochs and algorithm != "rl" else {})}
    run = TrainingRun.objects.create(project=project, algorithm=algorithm, snapshot=snapshot,
                                     init_checkpoint=init_checkpoint, config=config)
    audit_record(actor=actor, action="run.create", target=run, data={"snapshot": snapshot.pk, "algorithm": algorithm})
    transaction.on_commit(lambda: tasks.training_run_execute.delay(run.pk))
    return run


def _warnings_add(run: TrainingRun, final: dict, *, phase: str = "") -> None:
    """Keep the trainer's warnings (a time budget that cut training, capped epochs) on the run, for people."""
    new = [f"{phase}: {text}" if phase else text for text in final.get("metrics", {}).get("warnings", [])]
    if new:
        run.warnings = [*run.warnings, *new]
        TrainingRun.objects.filter(pk=run.pk).update(warnings=run.warnings)


def _trainer_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "trainer", *args]


def trainer_stream(argv: list[str], on_progress) -> tuple[dict, str, int]:
    """Run one trainer command, calling ``on_progress(item)`` for each JSON progress line (those with
    "step"). Returns (the final {"done": true} line, stderr, exit status)."""
    import threading

    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
                            cwd=settings.BASE_DIR, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    final: dict = {}
    stderr_chunks: list[str] = []

    def drain():
        for line in proc.stderr:
            stderr_chunks.append(line)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    for line in proc.stdout:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if item.get("done"):
            final = item
        elif "step" in item:
            on_progress(item)
    proc.wait()
    reader.join(timeout=5)
    return final, "".join(stderr_chunks), proc.returncode


def trainer_failure(phase: str, returncode: int, stderr: str) -> str:
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return f"trainer {phase} exited with {returncode}: {tail[0]}"


def _stream(run: TrainingRun, argv: list[str], *, phase: str, weight: tuple[float, float],
            phases: dict[str, tuple[float, float]] | None = None) -> dict:
    """Run one trainer command; progress lines update the run. Returns the final {"done": true} line. A command
    of several parts names each line's ``phase``; ``phases`` gives each its share of the run's progress."""
    last_save = 0.0

    def on_progress(item):
        nonlocal last_save
        if not item.get("total"):
            return
        item.setdefault("phase", phase)
        lo, hi = (phases or {}).get(item["phase"], weight)
        run.progress = round(lo + (hi - lo) * min(1.0, item["step"] / item["total"]), 4)
        run.metrics.append(item)
        if len(run.metrics) > MAX_METRIC_POINTS:
            run.metrics = run.metrics[::2]
        if time.monotonic() - last_save > 1.0:
            TrainingRun.objects.filter(pk=run.pk).update(progress=run.progress, metrics=run.metrics)
            last_save = time.monotonic()

    final, stderr, returncode = trainer_stream(argv, on_progress)
    run.log = (run.log + f"\n$ {' '.join(argv[2:])}\n" + stderr)[-LOG_TAIL_CHARS:]
    TrainingRun.objects.filter(pk=run.pk).update(progress=run.progress, metrics=run.metrics, log=run.log)
    if returncode != 0:
        raise ApplicationError(trainer_failure(phase, returncode, stderr))
    return final


STAGE_OPTIONS = ("max_steps", "max_seconds", "max_epochs", "lr", "lora")  # passed to the trainer as --max-steps ...


def _stages_execute(run: TrainingRun, out: Path) -> tuple[Path, dict]:
    """A recipe run: each stage trains on its snapshot from the previous stage's output (the first from the
    run's init checkpoint), e.g. SFT on SFT+RFT rows, then DPO on correction pairs. The last stage writes
    ``checkpoint``."""
    from flywheel.models import DatasetSnapshot

    stages = run.config["stages"]
    init = run.init_checkpoint.uri if run.init_checkpoint else "tiny"
    metrics, ckpt = [], out / "checkpoint"
    for i, stage in enumerate(stages):
        snapshot = DatasetSnapshot.objects.get(pk=stage["snapshot"])
        ckpt = out / ("checkpoint" if i == len(stages) - 1 else f"stage-{i + 1}-{stage['algorithm']}")
        argv = _trainer_argv(stage["algorithm"], "--data", default_storage.path(snapshot.file), "--init", init,
                             "--out", str(ckpt))
        for key in STAGE_OPTIONS:
            if stage.get(key) not in (None, ""):
                argv += ["--" + key.replace("_", "-"), str(stage[key])]
        final = _stream(run, argv, phase=stage["algorithm"], weight=(i / len(stages), (i + 1) / len(stages)))
        metrics.append({"algorithm": stage["algorithm"], "snapshot": snapshot.pk, **final.get("metrics", {})})
        _warnings_add(run, final, phase=stage["algorithm"].upper() if len(stages) > 1 else "")
        init = str(ckpt)
    return ckpt, {**metrics[-1], "stages": metrics}


@transaction.atomic
def recipe_run_create(*, project: Project, stages: list[dict], init_checkpoint, checkpoint_name: str,
                      extra: dict | None = None) -> TrainingRun:
    """A run of several stages (``{"algorithm", "snapshot", "max_steps", ...}`` each, on ready snapshots), for
    the caller to enqueue. Its checkpoint is registered as ``checkpoint_name``."""
    algorithm = "+".join(stage["algorithm"] for stage in stages)
    run = TrainingRun.objects.create(
        project=project, algorithm=algorithm if len(algorithm) <= 8 else "recipe", snapshot_id=stages[0]["snapshot"],
        init_checkpoint=init_checkpoint, config={"stages": stages, "checkpoint_name": checkpoint_name, **(extra or {})})
    return run


def run_execute(*, run_id: int) -> str:
    """Execute a queued run (safe to run again after a killed worker: it starts the run over)."""
    from flywheel.rollout_worker import Heartbeat

    run = TrainingRun.objects.select_related("project", "snapshot", "init_checkpoint").get(pk=run_id)
    if run.status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED):
        return run.status
    started = timezone.now()
    run.status, run.started_at, run.heartbeat_at, run.progress, run.metrics, run.error, run.warnings = (
        RunStatus.RUNNING, started, started, 0.0, [], "", [])
    run.save(update_fields=["status", "started_at", "heartbeat_at", "progress", "metrics", "error", "warnings"])
    out = run_dir(run)
    out.mkdir(parents=True, exist_ok=True)
    # a worker that dies stops beating; runs_restart_stalled then starts the run again on another worker
    with Heartbeat(lambda: TrainingRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING, started_at=started)
                   .update(heartbeat_at=timezone.now()), name=f"heartbeat-run-{run.pk}"):
        return _run_execute(run, out)


def _run_execute(run: TrainingRun, out: Path) -> str:
    from flywheel import services

    try:
        if run.config.get("stages"):
            ckpt, final = _stages_execute(run, out)
            final = {"metrics": final}
        else:
            if run.config.get("coldstart"):
                ckpt = out / "checkpoint"
                argv = _trainer_argv("coldstart", "--out", str(out))
                for key, value in run.config.get("options", {}).items():
                    argv += ["--" + key.replace("_", "-"), str(value)]
                final = _stream(run, argv, phase="sft", weight=(0.0, 1.0), phases={"demos": (0.0, 0.3),
                                                                                   "sft": (0.3, 1.0)})
            else:
                if run.snapshot is None:
                    raise ApplicationError("This run has no dataset snapshot to train on.")
                data = Path(default_storage.path(run.snapshot.file))
                init = run.init_checkpoint.uri if run.init_checkpoint else "tiny"
                ckpt = out / "checkpoint"
                argv = _trainer_argv(run.algorithm, "--data", str(data), "--init", init, "--out", str(ckpt))
                for key in ("max_steps", "max_seconds", "max_epochs"):
                    if run.config.get(key):
                        argv += ["--" + key.replace("_", "-"), str(run.config[key])]
                final = _stream(run, argv, phase=run.algorithm, weight=(0.0, 1.0))
            _warnings_add(run, final)
        name = run.config.get("deploy_as") or run.config.get("checkpoint_name") or f"run-{run.pk}"
        checkpoint = services.checkpoint_register(
            project=run.project, name=name, uri=str(ckpt), parent=run.init_checkpoint, produced_by=run,
            metrics=final.get("metrics", {}),
        )
        with transaction.atomic():
            run.status, run.checkpoint, run.progress, run.finished_at = RunStatus.SUCCEEDED, checkpoint, 1.0, timezone.now()
            run.save(update_fields=["status", "checkpoint", "progress", "finished_at"])
            if run.config.get("coldstart"):
                services.deployment_promote(project=run.project, checkpoint=checkpoint, reason="cold start v0")
        return RunStatus.SUCCEEDED
    except Exception as exc:
        log.exception("training run %s failed", run.pk)
        TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error=str(exc)[:2000],
                                                     finished_at=timezone.now())
        return RunStatus.FAILED


def runs_restart_stalled(*, older_than_seconds: float) -> list[int]:
    """Queue again every running run whose worker stopped heartbeating (killed, or its host lost): it starts
    over on a live `train` worker. A cycle's run is left to the cycle, which resumes its own (cycles.py)."""
    from flywheel import tasks
    from flywheel.models import Cycle

    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    restarted = []
    with transaction.atomic():
        stalled = (TrainingRun.objects.select_for_update(skip_locked=True)
                   .filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff).exclude(config__has_key="cycle"))
        for run in stalled:
            if Cycle.objects.filter(run=run).exists():
                continue
            note = f"\n[{timezone.now():%Y-%m-%d %H:%M:%S}] its train worker stopped; the run starts over\n"
            TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED, log=(run.log + note)[-LOG_TAIL_CHARS:])
            restarted.append(run.pk)
            transaction.on_commit(lambda pk=run.pk: tasks.training_run_execute.delay(pk))
    for pk in restarted:
        log.warning("training run %s lost its worker; queued again", pk)
    return restarted
