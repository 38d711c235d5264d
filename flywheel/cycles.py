"""Flywheel cycles: gate -> snapshot -> train -> evaluate -> decide -> deployed | rejected (| skipped | failed).

Each state is a thin Celery task (flywheel/tasks.py) that calls the function of the same name here. Training is
composed, not called back: the train state sends a Celery chain of its run (``cycle_run``, on the ``train`` queue)
and of itself, which then finds the run ended and moves on; the run knows nothing of the cycle.
The database holds everything a cycle knows, so any state can be retried:

- **One cycle at a time per project**: ``cycle_start`` locks the Project row, and a partial unique
  constraint ("one non-terminal cycle per project") is the backstop. Two triggers at once make one cycle.
- **State changes are compare-and-set** under the Cycle row lock: a task that finds its cycle already past
  its state does nothing, so a redelivered or duplicated task never runs a state twice to another result.
  What a state produced (its snapshots, its run, its Evaluation rows) is stored before the state moves on
  and reused by a retry.
- **Long states hold a lease** (``worker`` + ``heartbeat_at``, kept fresh by a heartbeat thread): snapshot
  (default queue), the training run and the evaluation (both on the ``train`` queue). A worker killed
  in any state stops heartbeating; ``cycles_resume`` (a beat task) then re-sends the state's task, which
  takes over the stale lease. Lost messages (a Redis restart) are re-sent the same way.

This module is the state machine only (settings: cycle_settings.py; measuring: evaluation.py; heartbeats:
heartbeats.py); it is longer than 400 lines because each state's compare-and-set, lease and retry read best
beside the others.

Evaluation runs on the ``train`` queue: it is ``python -m trainer eval`` as a subprocess, next to the
checkpoints the training wrote (on a GPU host in production), one job at a time like training, and
it does not take browsers from the ``rollouts`` workers that serve people's live sessions.
"""
from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from core.audit import audit_record
from core.errors import ApplicationError
from flywheel import (cycle_settings, datasets, deployments, evaluation, learned, policy_server, replay, snapshots,
                      training)
from flywheel.snapshot_kinds import DPO_KIND
from flywheel.heartbeats import Heartbeat, worker_name
from flywheel.models import (CYCLE_TERMINAL, Checkpoint, Cycle, CycleState, DatasetSnapshot, Deployment, Evaluation,
                             Project, RunStatus, SnapshotEpisode, SnapshotStatus, Split, TrainingRun)

log = logging.getLogger(__name__)

# --- what a cycle reads --------------------------------------------------------------------------
def _trained_on(project: Project, kind: str):
    """Episodes whose rows of ``kind`` a candidate has already been trained on (snapshots of trained cycles)."""
    return SnapshotEpisode.objects.filter(snapshot__project=project, snapshot__kind=kind,
                                          snapshot__cycles__candidate__isnull=False).values("episode_id")


def bucket_rows(project: Project, config: dict) -> dict:
    """Per recipe bucket: train-split rows in all, and rows no cycle has trained on yet (for DPO also the new
    pairs whose actions differ, ``new_differing``)."""
    out, target = {}, datasets.export_target(project)  # RL rows are steps for a checkpoint that reads screenshots
    for stage in config["recipe"]:
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[stage["algorithm"]]
        episodes = datasets.filter_apply(datasets.bucket_episodes(project, kind), project, kind, {"split": Split.TRAIN})
        new = episodes.exclude(pk__in=_trained_on(project, kind))
        out[kind] = {"rows": datasets.row_count(kind, episodes, target),
                     "new_rows": datasets.row_count(kind, new, target)}
        if kind == DPO_KIND.name:
            out[kind]["new_differing"] = DPO_KIND.differing_count(new)
    return out


def stage_verdicts(config: dict, rows: dict) -> dict:
    """Per recipe bucket, whether its stage's new rows can help (``ok``), and if not ``why``, with the number
    it has and needs: an SFT stage holds some out for validation and trains on the rest; a DPO pair whose chosen
    and rejected actions are the same (an edit of the thought alone) teaches the action nothing."""
    out = {}
    for stage in config["recipe"]:
        algorithm = stage["algorithm"]
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[algorithm]
        bucket = rows[kind]
        # a project that set min_new_rows below a stage's default asked for cycles on that little data (0: train
        # again on what the snapshots hold, new rows or not)
        need = stage.get("min_rows") or min(cycle_settings.MIN_STAGE_ROWS[algorithm], config["min_new_rows"])
        why = None
        if not need:
            have = bucket.get("new_differing", bucket["new_rows"])
        elif algorithm == "dpo":
            have = bucket.get("new_differing", bucket["new_rows"])
            if bucket["new_rows"] and not have:
                why = (f"dpo: none of its {bucket['new_rows']} new pairs changes the action (edits of the thought "
                       "alone); DPO would learn nothing from them")
            elif have < need:
                why = f"dpo: {have} new pairs whose actions differ, its recipe needs at least {need}"
        else:
            have = bucket["new_rows"]
            if have < need:
                why = f"{algorithm}: {have} new rows, its recipe needs at least {need}"
                if algorithm == "sft" and config.get("val_fraction") and need >= replay.MIN_ROWS_TO_HOLD_OUT:
                    held = replay.val_rows_for(need, config["val_fraction"], config.get("val_min_rows", 1))
                    why += f" ({held} held out for validation, the rest to train on)"
        out[kind] = {"ok": why is None, "new": have, "needed": need, **({"why": why} if why else {})}
    return out


def deployed_checkpoint(project: Project) -> Checkpoint | None:
    deployment = Deployment.objects.filter(project=project, active=True).select_related("checkpoint").first()
    return deployment.checkpoint if deployment else None


def _has_weights(checkpoint: Checkpoint | None) -> bool:
    return checkpoint is not None and bool(checkpoint.uri) and Path(checkpoint.uri).is_dir()


def cycle_dir(cycle: Cycle) -> Path:
    return settings.LOUPE_CHECKPOINT_DIR / f"project-{cycle.project_id}" / f"cycle-{cycle.iteration}"


# --- state plumbing ------------------------------------------------------------------------------
def _now_iso() -> str:
    return timezone.now().isoformat()


def _move(cycle: Cycle, to: str, **fields) -> None:
    """Move a cycle (whose row the caller holds locked) to state ``to``, closing the old state's timing."""
    now = timezone.now()
    timings = dict(cycle.timings or {})
    old = dict(timings.get(cycle.state, {}))
    if "started" in old and "finished" not in old:
        old["finished"] = now.isoformat()
        old["seconds"] = round((now - datetime.fromisoformat(old["started"])).total_seconds(), 2)
        timings[cycle.state] = old
    if to not in CYCLE_TERMINAL:
        timings[to] = {"started": now.isoformat()}
    cycle.state, cycle.timings, cycle.progress = to, timings, {}
    cycle.worker, cycle.heartbeat_at = "", None
    if to in CYCLE_TERMINAL:
        cycle.finished_at = now
    for key, value in fields.items():
        setattr(cycle, key, value)
    cycle.save()


def _locked(cycle_id: int, state: str) -> Cycle | None:
    """The cycle, row-locked, when it is still in ``state``; None when it has moved on (a duplicate task)."""
    cycle = Cycle.objects.select_for_update().select_related("project").filter(pk=cycle_id).first()
    return cycle if cycle is not None and cycle.state == state else None


def _fail(cycle_id: int, error: str, log_tail: str = "") -> None:
    with transaction.atomic():
        cycle = Cycle.objects.select_for_update().filter(pk=cycle_id).first()
        if cycle is None or cycle.state in CYCLE_TERMINAL:
            return
        _move(cycle, CycleState.FAILED, error=error[:4000], log_tail=log_tail[-8000:],
              decision=f"failed in {cycle.state}; the deployment is unchanged")
    log.warning("cycle %s failed: %s", cycle_id, error)


def _next(task_name: str, cycle_id: int) -> None:
    """Send the next state's task once this transaction commits."""
    from flywheel import tasks

    transaction.on_commit(lambda: getattr(tasks, task_name).delay(cycle_id))


STATE_TASKS = {CycleState.GATE: "cycle_gate", CycleState.SNAPSHOT: "cycle_snapshot", CycleState.TRAIN: "cycle_train",
               CycleState.EVALUATE: "cycle_evaluate", CycleState.DECIDE: "cycle_decide"}


@contextlib.contextmanager
def _lease(cycle_id: int, state: str):
    """Hold the cycle's lease while a long state runs; yields False when a live worker holds it already
    (or the cycle has left ``state``). The lease of a worker that stopped heartbeating may be taken over."""
    me = worker_name()
    stale = timezone.now() - timedelta(seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    free = Q(worker="") | Q(worker=me) | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)
    held = Cycle.objects.filter(Q(pk=cycle_id, state=state) & free).update(worker=me, heartbeat_at=timezone.now())
    if not held:
        yield False
        return

    def beat():
        Cycle.objects.filter(pk=cycle_id, worker=me).update(heartbeat_at=timezone.now())

    try:
        with Heartbeat(beat, f"cycle-{cycle_id}"):
            yield True
    finally:
        Cycle.objects.filter(pk=cycle_id, worker=me).update(worker="", heartbeat_at=None)


def _lease_free(cycle: Cycle) -> bool:
    stale = timezone.now() - timedelta(seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    return not cycle.worker or cycle.heartbeat_at is None or cycle.heartbeat_at < stale


# --- start -----------------------------------------------------------------------------------------
@transaction.atomic
def cycle_start(*, project: Project, actor=None, trigger: str = "manual") -> Cycle:
    """Open the project's next cycle (in state gate) and send it on; 409 while another one runs."""
    locked = Project.objects.select_for_update().get(pk=project.pk)  # serialises triggers of one project
    running = Cycle.objects.filter(project=locked).exclude(state__in=CYCLE_TERMINAL).first()
    if running is not None:
        raise ApplicationError(f"Cycle {running.iteration} is still in state '{running.state}'; a project runs one "
                               "cycle at a time. Wait for it to end.", status=409)
    config = cycle_settings.settings_clean(locked, {})
    evaluation.eval_plan(locked, config)  # refuse now, not halfway, when there is nothing to measure on
    _check_something_to_improve(locked, config)
    iteration = (Cycle.objects.filter(project=locked).aggregate(n=Max("iteration"))["n"] or 0) + 1
    try:
        with transaction.atomic():
            cycle = Cycle.objects.create(
                project=locked, iteration=iteration, trigger=trigger, config=config,
                triggered_by=actor if getattr(actor, "is_authenticated", False) else None,
                timings={CycleState.GATE: {"started": _now_iso()}})
    except IntegrityError:
        raise ApplicationError("Another cycle of this project started at the same moment; wait for it to end.",
                               status=409) from None
    audit_record(actor=actor, action="cycle.start", target=f"cycle:{cycle.pk}", project_id=project.pk,
                 data={"iteration": iteration, "trigger": trigger})
    _next("cycle_gate", cycle.pk)
    return cycle


def _check_something_to_improve(project: Project, config: dict) -> None:
    """Refuse a cycle while no checkpoint with weights is deployed (the scripted baseline serves until the cold start's
    v0 is trained): a cycle trains from the deployed checkpoint, and from nothing it would train an untrained model
    on a few dozen rows and lose to the baseline without a word of why."""
    if config["backend"] == "openai" and config["export"] == "lora":
        return  # adapters train from the served base the settings name
    deployed = deployed_checkpoint(project)
    if _has_weights(deployed):
        return
    serving = f"the project serves {deployed.name}" if deployed else "nothing is deployed"
    coldstart = TrainingRun.objects.filter(project=project, config__stages__0__algorithm=training.COLDSTART,
                                           status__in=[RunStatus.QUEUED, RunStatus.RUNNING]).first()
    waiting = (f" The cold start's v0 (training run #{coldstart.pk}, {coldstart.status}; its progress is on the Runs "
               "page) deploys itself when it finishes: start the cycle then." if coldstart else
               " Deploy a trained checkpoint first (the cold start's v0, or one registered on the Checkpoints page).")
    raise ApplicationError(f"No trained checkpoint is deployed to improve: {serving}. A cycle trains from the deployed "
                           f"checkpoint on what people corrected.{waiting}", status=409)


def cycle_scheduled(*, project_id: int) -> Cycle | None:
    """The beat's trigger: a cycle when none runs and the gate would pass, otherwise nothing (no row a tick)."""
    project = Project.objects.filter(pk=project_id).first()
    if project is None or Cycle.objects.filter(project=project).exclude(state__in=CYCLE_TERMINAL).exists():
        return None
    try:
        config = cycle_settings.settings_clean(project, {})
        new = sum(b["new_rows"] for b in bucket_rows(project, config).values())
        if new < max(1, config["min_new_rows"]):
            log.info("project %s: %s new rows, a cycle needs %s; not starting one", project_id, new,
                     config["min_new_rows"])
            return None
        return cycle_start(project=project, trigger="schedule")
    except ApplicationError as exc:
        log.info("project %s: scheduled cycle not started: %s", project_id, exc.message)
        return None


# --- the states ------------------------------------------------------------------------------------
def cycle_gate(*, cycle_id: int) -> str:
    """Enough new routed rows since the last trained cycle? Then snapshot; else skipped, saying why."""
    with transaction.atomic():
        cycle = _locked(cycle_id, CycleState.GATE)
        if cycle is None:
            return "moved on"
        rows = bucket_rows(cycle.project, cycle.config)
        new = sum(b["new_rows"] for b in rows.values())
        total = sum(b["rows"] for b in rows.values())
        need = cycle.config["min_new_rows"]
        data = {"buckets": rows, "new_rows": new, "min_new_rows": need}
        if total == 0 or new < need:
            why = "no routed rows to train on yet" if total == 0 else f"{new} new rows since the last cycle, {need} needed"
            kinds = ", ".join(rows)
            _move(cycle, CycleState.SKIPPED, decision=f"skipped: {why} ({kinds})"[:300], decision_data={"gate": data})
            return CycleState.SKIPPED
        data["stages"] = stage_verdicts(cycle.config, rows)
        if not any(v["ok"] for v in data["stages"].values()):
            why = "; ".join(v["why"] for v in data["stages"].values())
            _move(cycle, CycleState.SKIPPED, decision=f"skipped: no stage's new rows can help: {why}"[:300],
                  decision_data={"gate": data})
            return CycleState.SKIPPED
        _move(cycle, CycleState.SNAPSHOT, decision_data={"gate": data})
        _next("cycle_snapshot", cycle.pk)
    return CycleState.SNAPSHOT


def cycle_snapshot(*, cycle_id: int) -> str:
    """Freeze every non-empty recipe bucket (train split, all rows: training continues from the deployed
    checkpoint on the cumulative data). A retry reuses the snapshots this cycle already made."""
    with _lease(cycle_id, CycleState.SNAPSHOT) as held:
        if not held:
            return "busy or moved on"
        try:
            cycle = Cycle.objects.select_related("project").get(pk=cycle_id)
            kinds = [cycle_settings.BUCKET_FOR_ALGORITHM[s["algorithm"]] for s in cycle.config["recipe"]]
            kinds = [kind for kind in kinds if _stage_ok(cycle, kind)]
            total = len(kinds)
            for done, kind in enumerate(kinds):
                Cycle.objects.filter(pk=cycle_id).update(progress={"done": done, "total": total,
                                                                   "label": f"snapshot {kind}"})
                snapshot = cycle.snapshots.filter(kind=kind).first()
                if snapshot is None:
                    with transaction.atomic():
                        try:
                            snapshot = snapshots.snapshot_create(
                                project=cycle.project, kind=kind, filter={"split": Split.TRAIN}, build=False,
                                name=f"cycle {cycle.iteration} {kind}")
                        except ApplicationError:
                            continue  # this bucket has no rows: its stage is skipped
                        cycle.snapshots.add(snapshot)
                if snapshot.status == SnapshotStatus.BUILDING:
                    snapshot = snapshots.snapshot_build(snapshot_id=snapshot.pk)
                if snapshot.status == SnapshotStatus.FAILED and snapshot.rows == 0 and "nothing to snapshot" in snapshot.error:
                    continue  # its episodes made no rows (e.g. corrections identical to the proposals): stage skipped
                if snapshot.status == SnapshotStatus.FAILED:
                    raise ApplicationError(f"The {kind} snapshot #{snapshot.pk} failed: {snapshot.error}")
            if not cycle.snapshots.filter(status=SnapshotStatus.READY).exists():
                raise ApplicationError("No recipe bucket had rows to snapshot; there is nothing to train on.")
        except ApplicationError as exc:
            _fail(cycle_id, exc.message)
            return CycleState.FAILED
        with transaction.atomic():
            cycle = _locked(cycle_id, CycleState.SNAPSHOT)
            if cycle is None:
                return "moved on"
            _move(cycle, CycleState.TRAIN)
            _next("cycle_train", cycle.pk)
    return CycleState.TRAIN


def _stage_ok(cycle: Cycle, kind: str) -> bool:
    """Whether the gate kept the stage of bucket ``kind`` (a cycle gated before verdicts existed keeps all)."""
    return ((cycle.decision_data or {}).get("gate", {}).get("stages", {}).get(kind) or {"ok": True})["ok"]


def _stage_data(cycle: Cycle, stage: dict, snapshot, init: Checkpoint | None) -> dict:
    """What a stage trains on besides its snapshot (flywheel/replay.py), written under the cycle's directory:
    SFT on the new rows less a validation split plus a replay sample of the init checkpoint's lineage; DPO on the
    pairs whose actions differ. The same for text and screenshot rows: a screenshot row's images are placed beside
    the files (images/<name>, as in the export bundle). RL trains on the snapshot as it is."""
    config = cycle.config
    if stage["algorithm"] == "rl":
        return {}
    out_dir = cycle_dir(cycle) / "data"
    if stage["algorithm"] == "dpo":
        made = replay.dpo_differing(snapshot=snapshot, out_dir=out_dir)
        _place_images(made, [snapshot], out_dir)
        return made
    sources = replay.lineage_sources(init)
    made = replay.sft_mix(snapshot=snapshot, sources=sources, out_dir=out_dir,
                          seed=cycle.project_id * 100_003 + cycle.iteration, replay_ratio=config.get("replay_ratio", 0),
                          max_rows=config.get("replay_max_rows", 10_000_000),
                          val_fraction=config.get("val_fraction", 0), val_min_rows=config.get("val_min_rows", 1),
                          correction_weight=config.get("correction_weight", 1),
                          val_from=config.get("val_from", "new"))
    lineage = DatasetSnapshot.objects.filter(pk__in=[s["snapshot"] for s in sources if "snapshot" in s])
    _place_images(made, [snapshot, *lineage], out_dir)
    if made["val_file"]:
        made["patience"] = config.get("patience", 0)
    return made


def _place_images(made: dict, snapshots: list, out_dir: Path) -> None:
    """Screenshot rows (a checkpoint that reads them) find their images beside the stage's files."""
    if not ((snapshots[0].lineage or {}).get("rendered_for") or {}).get("reads_images"):
        return
    files = [made[key] for key in ("data_file", "val_file") if made.get(key)]
    try:
        placed = replay.place_images(files=files, snapshots=snapshots, out_dir=out_dir)
    except ValueError as exc:
        raise ApplicationError(f"The cycle's training rows cannot be laid out with their screenshots: {exc}.") from exc
    (made.get("mix") or made.get("pairs") or {})["images"] = placed


def _candidate_init(cycle: Cycle) -> Checkpoint | None:
    """What the candidate trains from: the served base for LoRA adapters on openai, else the deployed checkpoint
    (None when the deployed policy has no weights, e.g. the scripted baseline after a rollback: its run then fails
    saying so, flywheel.training.NO_INIT)."""
    config = cycle.config
    if config["backend"] == "openai" and config["export"] == "lora":
        return Checkpoint.objects.get(pk=config["base_checkpoint"])
    deployed = deployed_checkpoint(cycle.project)
    return deployed if _has_weights(deployed) else None


def cycle_train(*, cycle_id: int) -> str:
    """Create the cycle's training run once (with the data its stages train on beside their snapshots) and
    send it to the `train` queue; when the run has ended (the chain :func:`_send_run` sends calls back here), go on
    to evaluate, or fail with the trainer's log."""
    with transaction.atomic():
        cycle = _locked(cycle_id, CycleState.TRAIN)
        if cycle is None:
            return "moved on"
        if cycle.run_id is None:
            try:
                stages, data = _run_stages(cycle)
            except (ApplicationError, OSError, ValueError) as exc:
                error = getattr(exc, "message", None) or f"The cycle's training data could not be written: {exc}"
                log_tail = ""
            else:
                run = training.recipe_run_create(project=cycle.project, stages=stages,
                                                 init_checkpoint=_candidate_init(cycle),
                                                 checkpoint_name=f"c{cycle.iteration}", extra={"cycle": cycle.pk})
                cycle.run, cycle.progress = run, {"label": f"training run #{run.pk} queued", "sent_at": _now_iso()}
                cycle.decision_data = {**(cycle.decision_data or {}), "data": data}
                cycle.save(update_fields=["run", "progress", "decision_data", "updated_at"])
                transaction.on_commit(lambda: _send_run(cycle.pk, run.pk))
                return "training"
        else:
            run = TrainingRun.objects.get(pk=cycle.run_id)
            if run.status == RunStatus.SUCCEEDED:
                _move(cycle, CycleState.EVALUATE, candidate=run.checkpoint)
                _next("cycle_evaluate", cycle.pk)
                return CycleState.EVALUATE
            if run.status in (RunStatus.FAILED, RunStatus.CANCELLED):
                error = f"The training run #{run.pk} {run.status}: {run.error or 'no reason given'}"
                log_tail = run.log
            elif _lease_free(cycle) and (run.status == RunStatus.RUNNING or _resend_due(cycle)):
                # nobody executes it: its worker died mid-run, or the message was lost (a queued run is re-sent
                # only now and then, as it may simply wait behind another run on the train queue)
                cycle.progress = {**(cycle.progress or {}), "sent_at": _now_iso()}
                cycle.save(update_fields=["progress", "updated_at"])
                transaction.on_commit(lambda: _send_run(cycle.pk, run.pk))
                return "training (re-sent)"
            else:
                return "training"
    _fail(cycle_id, error, log_tail)
    return CycleState.FAILED


def _run_stages(cycle: Cycle) -> tuple[list[dict], dict]:
    """The run's stages (those the gate kept and whose snapshot has rows) with their data, and per bucket the
    counts of that data (new, held-out, replayed rows; pairs kept), which the cycle shows."""
    snapshots = {s.kind: s for s in cycle.snapshots.filter(status=SnapshotStatus.READY)}
    init = _candidate_init(cycle)
    stages, data = [], {}
    for stage in cycle.config["recipe"]:
        kind = cycle_settings.BUCKET_FOR_ALGORITHM[stage["algorithm"]]
        if kind not in snapshots or not _stage_ok(cycle, kind):
            continue
        extra = _stage_data(cycle, stage, snapshots[kind], init)
        data[kind] = dict(extra.get("mix") or extra.get("pairs") or {})
        if "data_file" in extra and not extra["data_file"]:
            data[kind]["dropped"] = "no pair whose actions differ: the stage is left out"
            continue
        stages.append({**stage, "snapshot": snapshots[kind].pk, **extra})
    if not stages:
        raise ApplicationError("No stage is left with rows that can help: "
                               + "; ".join(f"{k}: {v.get('dropped', '')}" for k, v in data.items()))
    return stages, data


def _resend_due(cycle: Cycle) -> bool:
    sent = (cycle.progress or {}).get("sent_at")
    wait = timedelta(seconds=5 * settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    return sent is None or datetime.fromisoformat(sent) < timezone.now() - wait


def _send_run(cycle_id: int, run_id: int) -> None:
    """The cycle's training run on the `train` queue, then the cycle's next step (cycle_train), as one Celery chain:
    the run knows nothing of the cycle, and the cycle goes on whether the run succeeded or failed (its status says
    which). A lost message is re-sent by cycle_train when cycles_resume finds the cycle idle."""
    from celery import chain

    from flywheel import tasks

    chain(tasks.cycle_run.si(cycle_id, run_id).set(queue="train"), tasks.cycle_train.si(cycle_id)).delay()


def cycle_run(*, cycle_id: int, run_id: int) -> str:
    """A cycle's training run, under the cycle's lease (so cycles_resume leaves it alone while it trains)."""
    with _lease(cycle_id, CycleState.TRAIN) as held:
        if not held:
            return "busy or moved on"
        status = TrainingRun.objects.values_list("status", flat=True).get(pk=run_id)
        if status not in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED):  # not a duplicate message
            Cycle.objects.filter(pk=cycle_id).update(progress={"label": f"training run #{run_id}"})
            status = training.run_execute(run_id=run_id)
    return status


def cycle_evaluate(*, cycle_id: int) -> str:
    """Measure the candidate and the deployed checkpoint on the same eval seeds in this cycle (`train` queue)."""
    with _lease(cycle_id, CycleState.EVALUATE) as held:
        if not held:
            return "busy or moved on"
        try:
            cycle = Cycle.objects.select_related("project", "candidate", "baseline").get(pk=cycle_id)
            if cycle.baseline_id is None:
                baseline = deployed_checkpoint(cycle.project)
                if baseline is not None:
                    Cycle.objects.filter(pk=cycle_id).update(baseline=baseline)
                cycle.baseline = baseline
            plan = evaluation.eval_plan(cycle.project, cycle.config)
            per_checkpoint = sum(len(g["tasks"]) * evaluation.seed_count(g["seeds"]) for g in plan)
            measured = [(cycle.candidate, "candidate")]
            if _has_weights(cycle.baseline) and cycle.baseline_id != cycle.candidate_id:
                measured.append((cycle.baseline, "deployed"))
            for i, (checkpoint, role) in enumerate(measured):
                evaluation.evaluate_checkpoint(cycle, checkpoint, role, plan,
                                               (i * per_checkpoint, len(measured) * per_checkpoint), cycle_dir(cycle))
            _learned(cycle)
        except ApplicationError as exc:
            _fail(cycle_id, exc.message, getattr(exc, "log_tail", ""))
            return CycleState.FAILED
        with transaction.atomic():
            cycle = _locked(cycle_id, CycleState.EVALUATE)
            if cycle is None:
                return "moved on"
            _move(cycle, CycleState.DECIDE)
            _next("cycle_decide", cycle.pk)
    return CycleState.DECIDE


def _learned(cycle: Cycle) -> None:
    """Whether the candidate learned the corrections it trained on (flywheel/learned.py), kept for the gate's
    report. A failure here is said in the report; it does not fail the cycle, whose measurement stands."""
    def progress(done: int, total: int) -> None:
        Cycle.objects.filter(pk=cycle.pk).update(progress={"done": done, "total": total,
                                                           "label": "replaying corrections"})

    try:
        summary = learned.corrections_replay(cycle, on_progress=progress)
    except Exception as exc:  # noqa: BLE001 - the report says it; the evaluation is done
        log.exception("cycle %s: replaying its corrections failed", cycle.pk)
        summary = {**learned.learned_summary(cycle), "error": f"{type(exc).__name__}: {exc}"}
    fresh = Cycle.objects.only("decision_data").get(pk=cycle.pk)
    Cycle.objects.filter(pk=cycle.pk).update(decision_data={**(fresh.decision_data or {}), "learned": summary})


def _learned_words(summary: dict | None) -> str:
    """'; learned 12/14 corrections trained on, 3/4 held out' for the gate's report ('' when none were replayed)."""
    if not summary or not (summary["trained"]["corrections"] or summary["held_out"]["corrections"]):
        return ""
    trained, held = summary["trained"], summary["held_out"]
    return (f"; learned {trained['learned']}/{trained['corrections']} corrections trained on, "
            f"{held['learned']}/{held['corrections']} held out")


def _pct(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.1f}%"


def decision_of(cycle: Cycle) -> dict:
    """The gate's verdict with its numbers: promote only when the candidate's success rate beats the deployed
    checkpoint's, measured in this cycle on the same seeds, by at least the margin."""
    evaluations = {e.checkpoint_id: e for e in Evaluation.objects.filter(cycle=cycle)}
    candidate = evaluations[cycle.candidate_id]
    margin = cycle.config["margin"]
    data = {"candidate": {"checkpoint": cycle.candidate.name, "success_rate": candidate.success_rate,
                          "episodes": candidate.episodes},
            "margin": margin, "learned": (cycle.decision_data or {}).get("learned")}
    said = _learned_words(data["learned"])
    name = cycle.candidate.name
    if not _has_weights(cycle.baseline):
        if cycle.baseline is None:
            what = "no deployed policy"
        elif cycle.baseline.uri.startswith("scripted:"):
            what = f"the scripted baseline '{cycle.baseline.name}'"
        else:
            what = f"'{cycle.baseline.name}', whose files are missing"
        data.update(deployed=None, promote=True)
        data["text"] = (f"promote: {name} reaches {_pct(candidate.success_rate)}; the project serves {what}, which "
                        "has no model to measure, so the first trained candidate replaces it (as v0 would)" + said)
        return data
    deployed = evaluations[cycle.baseline_id]
    gain = candidate.success_rate - deployed.success_rate
    data["deployed"] = {"checkpoint": cycle.baseline.name, "success_rate": deployed.success_rate,
                        "episodes": deployed.episodes}
    data["gain"] = round(gain, 6)
    data["promote"] = gain > 0 and gain >= margin - 1e-9
    versus = (f"{name} {_pct(candidate.success_rate)} vs deployed {cycle.baseline.name} "
              f"{_pct(deployed.success_rate)} on the same {candidate.episodes} eval episodes")
    if data["promote"]:
        data["text"] = f"promote: {versus}; gain {gain * 100:+.1f} points >= margin {margin * 100:.1f}" + said
    else:
        data["text"] = f"rejected: {versus}; gain {gain * 100:+.1f} points, the margin is {margin * 100:.1f}" + said
    return data


def cycle_decide(*, cycle_id: int) -> str:
    """Promote, reject, or wait for a manager (auto_deploy off)."""
    from flywheel import tasks

    cycle = Cycle.objects.select_related("project", "candidate", "baseline").get(pk=cycle_id)
    if cycle.state != CycleState.DECIDE:
        return "moved on"
    if deployed_checkpoint(cycle.project) != cycle.baseline:
        # someone deployed or rolled back meanwhile: measure against what is deployed now
        with transaction.atomic():
            cycle = _locked(cycle_id, CycleState.DECIDE)
            if cycle is None:
                return "moved on"
            cycle.state = CycleState.EVALUATE
            cycle.baseline = None
            cycle.save(update_fields=["state", "baseline", "updated_at"])
            transaction.on_commit(lambda: tasks.cycle_evaluate.delay(cycle_id))
        return CycleState.EVALUATE
    data = decision_of(cycle)
    if not data["promote"]:
        with transaction.atomic():
            cycle = _locked(cycle_id, CycleState.DECIDE)
            if cycle is not None:
                _move(cycle, CycleState.REJECTED, decision=data["text"][:300], decision_data={
                    **cycle.decision_data, "decision": data})
        return CycleState.REJECTED
    if not cycle.config["auto_deploy"]:
        text = f"awaiting a manager's approval; {data['text']}"
        Cycle.objects.filter(pk=cycle_id, state=CycleState.DECIDE).update(
            decision=text[:300], decision_data={**cycle.decision_data, "decision": data, "awaiting_approval": True})
        return "awaiting approval"
    return _deploy(cycle_id, data, actor=None, from_states=(CycleState.DECIDE,))


def _deploy(cycle_id: int, data: dict, *, actor, from_states: tuple) -> str:
    """Serve the candidate: on openai, load it into the running server under a new name first (idempotent);
    then promote it and close the cycle, in one transaction. A refused deployment fails the cycle."""
    cycle = Cycle.objects.select_related("project", "candidate").get(pk=cycle_id)
    config, candidate = cycle.config, cycle.candidate
    served_name = ""
    try:
        if candidate is None:
            raise ApplicationError("This cycle has no candidate checkpoint to deploy.", status=409)
        deployments.checkpoint_check_files(candidate.uri)
        if config["backend"] == "openai":
            served_name = policy_server.served_name_for(candidate)
            path = Path(candidate.uri) / "adapter" if config["export"] == "lora" else Path(candidate.uri)
            if not path.is_dir():
                raise ApplicationError(f"{path} does not exist: the candidate was not trained with LoRA, so it has no "
                                       "adapter to load. Set the recipe's stage to lora or the export to full.", status=409)
            # an adapter is checked against the base the server was started with (vLLM would apply a misfit as nothing)
            base = Checkpoint.objects.filter(pk=config.get("base_checkpoint")).values_list("uri", flat=True).first()
            policy_server.served_model_load(name=served_name, path=str(path), base=base)
        with transaction.atomic():
            cycle = Cycle.objects.select_for_update().get(pk=cycle_id)
            if cycle.state not in from_states:
                return "moved on"
            who = f"approved by {actor.username}" if actor is not None else "auto-deployed"
            deployment = deployments.deployment_promote(
                project=cycle.project, checkpoint=candidate, actor=actor, backend=config["backend"],
                served_name=served_name, reason=f"cycle {cycle.iteration}: {who}")
            if actor is None:
                text = data["text"]
            elif cycle.state == CycleState.REJECTED:
                text = f"{who} over the gate's verdict ({data['text']})"
            else:
                text = f"{who}; the gate said: {data['text']}"
            _move(cycle, CycleState.DEPLOYED, deployment=deployment, decision=text[:300],
                  decision_data={**cycle.decision_data, "decision": {**data, "by": who}})
    except ApplicationError as exc:
        if actor is not None:
            raise  # a person asked: they see the refusal, and the cycle stays as it was
        _fail(cycle_id, f"The deployment was refused: {exc.message}")
        return CycleState.FAILED
    return CycleState.DEPLOYED


def cycle_approve(*, cycle: Cycle, actor) -> Cycle:
    """A manager deploys the candidate by hand: one awaiting approval, or one the gate rejected."""
    if cycle.state not in (CycleState.DECIDE, CycleState.REJECTED) or cycle.candidate_id is None:
        raise ApplicationError(f"Cycle {cycle.iteration} is {cycle.state}; only a candidate awaiting approval or "
                               "rejected by the gate can be approved.", status=409)
    if cycle.state == CycleState.DECIDE and not cycle.decision_data.get("awaiting_approval"):
        raise ApplicationError("The gate is still deciding on this candidate; wait a moment.", status=409)
    data = dict(cycle.decision_data.get("decision") or {"text": f"{cycle.candidate.name} approved without a gate"})
    state = _deploy(cycle.pk, data, actor=actor, from_states=(CycleState.DECIDE, CycleState.REJECTED))
    if state != CycleState.DEPLOYED:
        raise ApplicationError("The cycle changed while you approved it; reload and try again.", status=409)
    audit_record(actor=actor, action="cycle.approve", target=f"cycle:{cycle.pk}", project_id=cycle.project_id,
                 data={"checkpoint": cycle.candidate_id})
    return Cycle.objects.get(pk=cycle.pk)


@transaction.atomic
def cycle_reject(*, cycle: Cycle, actor, reason: str = "") -> Cycle:
    """A manager turns down a candidate that awaits approval."""
    locked = _locked(cycle.pk, CycleState.DECIDE)
    if locked is None or not locked.decision_data.get("awaiting_approval"):
        raise ApplicationError(f"Cycle {cycle.iteration} is not awaiting approval.", status=409)
    data = locked.decision_data.get("decision", {})
    text = f"rejected by {actor.username}" + (f": {reason}" if reason else "") + f"; {data.get('text', '')}"
    _move(locked, CycleState.REJECTED, decision=text[:300],
          decision_data={**locked.decision_data, "awaiting_approval": False, "rejected_by": actor.username,
                         "reason": reason})
    audit_record(actor=actor, action="cycle.reject", target=f"cycle:{cycle.pk}", project_id=cycle.project_id,
                 data={"reason": reason})
    return locked


# --- resuming ---------------------------------------------------------------------------------------
def cycle_advance(*, cycle_id: int) -> str:
    """Send the task of the state a cycle is in (after a lost message or a dead worker)."""
    from flywheel import tasks

    cycle = Cycle.objects.filter(pk=cycle_id).first()
    if cycle is None or cycle.state in CYCLE_TERMINAL:
        return "nothing to do"
    if cycle.state == CycleState.DECIDE and cycle.decision_data.get("awaiting_approval"):
        return "awaiting approval"
    getattr(tasks, STATE_TASKS[cycle.state]).delay(cycle_id)
    return cycle.state


def cycles_resume() -> list[int]:
    """Beat task: re-send the state task of every cycle that nobody has worked on for a while (its worker was
    killed, or Redis lost the message). Duplicates are harmless: states are compare-and-set and leased."""
    stale = timezone.now() - timedelta(seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    waiting = (Cycle.objects.exclude(state__in=CYCLE_TERMINAL).filter(updated_at__lt=stale)
               .filter(Q(worker="") | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)))
    resumed = []
    for cycle in waiting:
        if cycle.state == CycleState.DECIDE and cycle.decision_data.get("awaiting_approval"):
            continue
        Cycle.objects.filter(pk=cycle.pk).update(updated_at=timezone.now())  # one re-send per quiet period
        cycle_advance(cycle_id=cycle.pk)
        resumed.append(cycle.pk)
    return resumed
