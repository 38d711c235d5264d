"""Flywheel cycles: gate -> snapshot -> train -> evaluate -> decide -> deployed | rejected (| skipped | failed).

Each state is a thin Celery task (cycles/tasks.py) that calls the function of the same name here. Training is
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

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from core.audit import audit_record
from core.errors import ApplicationError
from core.jobs import job
from cycles import cycle_settings, evaluation, learned
from cycles.models import CYCLE_TERMINAL, Cycle, CycleState
from cycles.stages import (
    bucket_rows,
    candidate_init,
    cycle_dir,
    deployed_checkpoint,
    has_weights,
    run_stages,
    stage_ok,
    stage_verdicts,
)
from projects.models import Project, Split
from rollouts.heartbeats import Heartbeat, worker_name
from snapshots import build
from snapshots.models import SnapshotStatus
from training import runs
from training.models import RunStatus, TrainingRun

log = logging.getLogger(__name__)


# --- state plumbing ------------------------------------------------------------------------------
def _now_iso() -> str:
    return timezone.now().isoformat()


def cycle_move(cycle: Cycle, to: str, **fields) -> None:
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


def cycle_locked(cycle_id: int, state: str) -> Cycle | None:
    """The cycle, row-locked, when it is still in ``state``; None when it has moved on (a duplicate task)."""
    cycle = Cycle.objects.select_for_update().select_related("project").filter(pk=cycle_id).first()
    return cycle if cycle is not None and cycle.state == state else None


def cycle_fail(cycle_id: int, error: str, log_tail: str = "") -> None:
    with transaction.atomic():
        cycle = Cycle.objects.select_for_update().filter(pk=cycle_id).first()
        if cycle is None or cycle.state in CYCLE_TERMINAL:
            return
        cycle_move(cycle, CycleState.FAILED, error=error[:4000], log_tail=log_tail[-8000:],
              decision=f"failed in {cycle.state}; the deployment is unchanged")
    log.warning("cycle %s failed: %s", cycle_id, error)


def _next(task_name: str, cycle_id: int) -> None:
    """Send the next state's task once this transaction commits."""

    transaction.on_commit(lambda: state_task(task_name).delay(cycle_id))


def state_task(name: str):
    """A cycle's Celery task by its short name (``cycle_gate``...), under the name workers and beat know it by."""
    return job(f"flywheel.tasks.{name}")


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
    if has_weights(deployed):
        return
    serving = f"the project serves {deployed.name}" if deployed else "nothing is deployed"
    coldstart = TrainingRun.objects.filter(project=project, config__stages__0__algorithm=runs.COLDSTART,
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
        cycle = cycle_locked(cycle_id, CycleState.GATE)
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
            cycle_move(cycle, CycleState.SKIPPED, decision=f"skipped: {why} ({kinds})"[:300], decision_data={"gate": data})
            return CycleState.SKIPPED
        data["stages"] = stage_verdicts(cycle.config, rows)
        if not any(v["ok"] for v in data["stages"].values()):
            why = "; ".join(v["why"] for v in data["stages"].values())
            cycle_move(cycle, CycleState.SKIPPED, decision=f"skipped: no stage's new rows can help: {why}"[:300],
                  decision_data={"gate": data})
            return CycleState.SKIPPED
        cycle_move(cycle, CycleState.SNAPSHOT, decision_data={"gate": data})
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
            kinds = [kind for kind in kinds if stage_ok(cycle, kind)]
            total = len(kinds)
            for done, kind in enumerate(kinds):
                Cycle.objects.filter(pk=cycle_id).update(progress={"done": done, "total": total,
                                                                   "label": f"snapshot {kind}"})
                snapshot = cycle.snapshots.filter(kind=kind).first()
                if snapshot is None:
                    with transaction.atomic():
                        try:
                            snapshot = build.snapshot_create(
                                project=cycle.project, kind=kind, filter={"split": Split.TRAIN}, build=False,
                                name=f"cycle {cycle.iteration} {kind}")
                        except ApplicationError:
                            continue  # this bucket has no rows: its stage is skipped
                        cycle.snapshots.add(snapshot)
                if snapshot.status == SnapshotStatus.BUILDING:
                    snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
                if snapshot.status == SnapshotStatus.FAILED and snapshot.rows == 0 and "nothing to snapshot" in snapshot.error:
                    continue  # its episodes made no rows (e.g. corrections identical to the proposals): stage skipped
                if snapshot.status == SnapshotStatus.FAILED:
                    raise ApplicationError(f"The {kind} snapshot #{snapshot.pk} failed: {snapshot.error}")
            if not cycle.snapshots.filter(status=SnapshotStatus.READY).exists():
                raise ApplicationError("No recipe bucket had rows to snapshot; there is nothing to train on.")
        except ApplicationError as exc:
            cycle_fail(cycle_id, exc.message)
            return CycleState.FAILED
        with transaction.atomic():
            cycle = cycle_locked(cycle_id, CycleState.SNAPSHOT)
            if cycle is None:
                return "moved on"
            cycle_move(cycle, CycleState.TRAIN)
            _next("cycle_train", cycle.pk)
    return CycleState.TRAIN


def cycle_train(*, cycle_id: int) -> str:
    """Create the cycle's training run once (with the data its stages train on beside their snapshots) and
    send it to the `train` queue; when the run has ended (the chain :func:`_send_run` sends calls back here), go on
    to evaluate, or fail with the trainer's log."""
    with transaction.atomic():
        cycle = cycle_locked(cycle_id, CycleState.TRAIN)
        if cycle is None:
            return "moved on"
        if cycle.run_id is None:
            try:
                stages, data = run_stages(cycle)
            except (ApplicationError, OSError, ValueError) as exc:
                error = getattr(exc, "message", None) or f"The cycle's training data could not be written: {exc}"
                log_tail = ""
            else:
                run = runs.recipe_run_create(project=cycle.project, stages=stages,
                                                 init_checkpoint=candidate_init(cycle),
                                                 checkpoint_name=f"c{cycle.iteration}", extra={"cycle": cycle.pk})
                cycle.run, cycle.progress = run, {"label": f"training run #{run.pk} queued", "sent_at": _now_iso()}
                cycle.decision_data = {**(cycle.decision_data or {}), "data": data}
                cycle.save(update_fields=["run", "progress", "decision_data", "updated_at"])
                transaction.on_commit(lambda: _send_run(cycle.pk, run.pk))
                return "training"
        else:
            run = TrainingRun.objects.get(pk=cycle.run_id)
            if run.status == RunStatus.SUCCEEDED:
                cycle_move(cycle, CycleState.EVALUATE, candidate=run.checkpoint)
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
    cycle_fail(cycle_id, error, log_tail)
    return CycleState.FAILED


def _resend_due(cycle: Cycle) -> bool:
    sent = (cycle.progress or {}).get("sent_at")
    wait = timedelta(seconds=5 * settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    return sent is None or datetime.fromisoformat(sent) < timezone.now() - wait


def _send_run(cycle_id: int, run_id: int) -> None:
    """The cycle's training run on the `train` queue, then the cycle's next step (cycle_train), as one Celery chain:
    the run knows nothing of the cycle, and the cycle goes on whether the run succeeded or failed (its status says
    which). A lost message is re-sent by cycle_train when cycles_resume finds the cycle idle."""
    from celery import chain

    chain(state_task("cycle_run").si(cycle_id, run_id).set(queue="train"), state_task("cycle_train").si(cycle_id)).delay()


def cycle_run(*, cycle_id: int, run_id: int) -> str:
    """A cycle's training run, under the cycle's lease (so cycles_resume leaves it alone while it trains)."""
    with _lease(cycle_id, CycleState.TRAIN) as held:
        if not held:
            return "busy or moved on"
        status = TrainingRun.objects.values_list("status", flat=True).get(pk=run_id)
        if status not in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED):  # not a duplicate message
            Cycle.objects.filter(pk=cycle_id).update(progress={"label": f"training run #{run_id}"})
            status = runs.run_execute(run_id=run_id)
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
            if has_weights(cycle.baseline) and cycle.baseline_id != cycle.candidate_id:
                measured.append((cycle.baseline, "deployed"))
            for i, (checkpoint, role) in enumerate(measured):
                evaluation.evaluate_checkpoint(cycle, checkpoint, role, plan,
                                               (i * per_checkpoint, len(measured) * per_checkpoint), cycle_dir(cycle))
            _learned(cycle)
        except ApplicationError as exc:
            cycle_fail(cycle_id, exc.message, getattr(exc, "log_tail", ""))
            return CycleState.FAILED
        with transaction.atomic():
            cycle = cycle_locked(cycle_id, CycleState.EVALUATE)
            if cycle is None:
                return "moved on"
            cycle_move(cycle, CycleState.DECIDE)
            _next("cycle_decide", cycle.pk)
    return CycleState.DECIDE


# --- resuming ---------------------------------------------------------------------------------------
def cycle_advance(*, cycle_id: int) -> str:
    """Send the task of the state a cycle is in (after a lost message or a dead worker)."""

    cycle = Cycle.objects.filter(pk=cycle_id).first()
    if cycle is None or cycle.state in CYCLE_TERMINAL:
        return "nothing to do"
    if cycle.state == CycleState.DECIDE and cycle.decision_data.get("awaiting_approval"):
        return "awaiting approval"
    state_task(STATE_TASKS[cycle.state]).delay(cycle_id)
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


def _learned(cycle: Cycle) -> None:
    """Whether the candidate learned the corrections it trained on (cycles/learned.py), kept for the gate's
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
