"""Episodes: starting them in their lane, branching, a worker claiming and finishing them, and the live state people
change (control, pause, outcome). Their steps are rollouts/steps.py."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agent.envs import tasks_for
from core.audit import audit_record
from core.errors import ApplicationError
from core.jobs import job
from projects.taskspec_files import start_refusal
from rollouts import privacy, selectors, signals
from rollouts.events import event_append
from rollouts.models import Deployment, Episode, EpisodeStatus, Mode, Outcome, ReviewStatus
from rollouts.routing import routing_of


class EpisodeStop(Exception):
    """Raised by a supervisor to end an episode early with `status` (e.g. interrupted when nobody is there)."""

    status = EpisodeStatus.INTERRUPTED


MAX_BATCH = 500
# People never wait behind machines: a supervised episode runs on the `live` queue, which workers kept for
# people consume, and autonomous ones on `rollouts`, however many a batch queued.
LANES = {Mode.SUPERVISED: "live", Mode.AUTONOMOUS: "rollouts"}


def episode_enqueue(episode: Episode) -> None:
    """Send an episode to its lane's workers once the surrounding transaction commits."""
    queue = LANES.get(episode.mode, "rollouts")
    transaction.on_commit(lambda: job("flywheel.tasks.episode_run").apply_async((episode.pk,), queue=queue))


def episode_payload(episode: Episode) -> dict:
    """The JSON shape of an episode in events and the API."""
    return {
        "id": episode.pk, "project": episode.project_id, "seed": episode.seed, "mode": episode.mode,
        "status": episode.status, "outcome": episode.outcome, "end_reason": episode.end_reason,
        "reward": episode.env_reward, "n_steps": episode.n_steps,
        "task": {"id": episode.task_id, "task_name": episode.task.task_name, "env_kind": episode.task.env_kind,
                 "split": episode.task.split},
        "created_by": {"id": episode.created_by_id, "username": episode.created_by.username} if episode.created_by_id else None,
        "checkpoint": {"id": episode.checkpoint_id, "name": episode.checkpoint.name} if episode.checkpoint_id else None,
        "control": {"username": episode.controller.username} if episode.controller_id else None,
        "pending_index": episode.pending_index, "human_control": episode.human_control,
        "n_interventions": episode.n_interventions, "n_void": episode.n_void,
        "review_status": episode.review_status, "review_summary": episode.review_summary or {},
        "review_reason": episode.review_reason,
        "instruction": episode.instruction or episode.task.instruction_template,
        "comment": episode.comment,
        "created_at": episode.created_at.isoformat() if episode.created_at else None,
        "started_at": episode.started_at.isoformat() if episode.started_at else None,
        "finished_at": episode.finished_at.isoformat() if episode.finished_at else None,
        "queue": selectors.episode_queue_position(episode),
        "branch_of": {"episode": episode.parent_id, "step": episode.branched_at} if episode.parent_id else None,
        "ask": {"reason": episode.ask_reason, "asked_at": episode.asked_at.isoformat()} if episode.asked_at else None,
        "rl_run": episode.rl_run,
    }


def _episode_state_event(episode: Episode, *, fresh: bool = False) -> None:
    """Append the episode's state as watchers see it; re-read first unless ``fresh`` (just read with its relations)."""
    if not fresh:
        episode = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").get(pk=episode.pk)
    event_append(episode_id=episode.pk, type="episode.state", payload=episode_payload(episode))


def scripted_refusal(task, backend: str) -> str:
    """Why a policy served by ``backend`` cannot act on ``task``, or "": the scripted baseline plays the solutions
    written for the shipped tasks, and a task written as JSON (an authored task) has none."""
    if backend != "scripted" or task.definition is None:
        return ""
    return (f"The deployed policy is the scripted baseline, which can only play the solutions written for the shipped "
            f"tasks; '{task.task_name}' is your own task (written as JSON), so it has none. Deploy a trained "
            "checkpoint to run it (Runs page), or try a shipped task.")


@transaction.atomic
def episodes_start(*, project, task, seeds: list[int], mode: str, actor) -> list[Episode]:
    """Queue one episode per seed; each runs in its lane (LANES) once this transaction commits."""
    if task.project_id != project.pk:
        raise ApplicationError("That task belongs to another project.", status=404)
    if mode not in Mode.values:
        raise ApplicationError(f"Unknown mode '{mode}'; use autonomous or supervised.", errors={"mode": ["Invalid choice."]})
    if not seeds:
        raise ApplicationError("Give at least one seed.", errors={"seeds": ["This list may not be empty."]})
    if len(seeds) > MAX_BATCH:
        raise ApplicationError(f"At most {MAX_BATCH} episodes a batch.", errors={"seeds": ["Too many."]})
    bad = [s for s in seeds if not task.seed_start <= s <= task.seed_end]
    if bad:
        raise ApplicationError(f"Seed {bad[0]} is outside this task's range {task.seed_start}-{task.seed_end}.",
                               errors={"seeds": ["Out of range."]})
    if mode == Mode.SUPERVISED and len(seeds) > 1:
        raise ApplicationError("A supervised episode needs a person; start them one at a time.")
    deployment = Deployment.objects.filter(project=project, active=True).only("backend").first()
    if deployment is None:
        raise ApplicationError("This project has no deployed policy yet; wait for the cold-start run on the Runs page "
                               "or deploy a checkpoint.", status=409)
    refusal = scripted_refusal(task, deployment.backend)
    if refusal:
        raise ApplicationError(refusal, status=409)
    refusal = start_refusal(task)  # an OSWorld task whose downloaded files the project's store lacks
    if refusal:
        raise ApplicationError(refusal, status=409)
    episodes = [
        Episode.objects.create(project=project, task=task, seed=seed, mode=mode, created_by=actor,
                               controller=actor if mode == Mode.SUPERVISED else None)
        for seed in seeds
    ]
    for episode in episodes:
        _episode_state_event(episode)
        episode_enqueue(episode)
    audit_record(actor=actor, action="episodes.start", target=f"task:{task.pk}", project_id=project.pk,
                 data={"episodes": [e.pk for e in episodes], "mode": mode})
    return episodes


RUNNING_STATUSES = (EpisodeStatus.QUEUED, EpisodeStatus.RUNNING, EpisodeStatus.PAUSED)


@transaction.atomic
def episode_branch(*, parent: Episode, step: int, mode: str, actor) -> Episode:
    """Queue a branch of ``parent`` at its step ``step``: a new episode on the same task and seed that first
    replays the parent's actions of steps 0..step-1 (checking at each that the screen is the parent's, see
    rollout_worker.run) and then acts anew at ``step``, under a person (supervised) or the model. The parent is
    not changed. Refused: an unknown mode (400), a step outside the parent's steps (400, naming the range), a
    parent still queued or running (409), a task that can no longer be run (410), no deployed policy (409)."""
    parent = Episode.objects.select_for_update().select_related("task", "project").get(pk=parent.pk)
    if mode not in Mode.values:
        raise ApplicationError(f"Unknown mode '{mode}'; use autonomous or supervised.", errors={"mode": ["Invalid choice."]})
    if parent.status in RUNNING_STATUSES:
        raise ApplicationError(f"Episode {parent.pk} is still {parent.status}; branch it once it has ended.", status=409)
    n_steps = parent.steps.count()
    if n_steps == 0:
        raise ApplicationError(f"Episode {parent.pk} has no steps to branch from.", errors={"step": ["No steps."]})
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step < n_steps:
        raise ApplicationError(f"Step {step} is not a step of episode {parent.pk}; choose one from 0 to {n_steps - 1}.",
                               errors={"step": [f"Use 0 to {n_steps - 1}."]})
    task = parent.task
    try:
        known = tasks_for(task.env_kind)
    except ValueError:
        known = []
    if task.definition is None and task.task_name not in known:  # an authored task carries its own JSON
        raise ApplicationError(f"The task '{task.task_name}' of episode {parent.pk} no longer exists in the "
                               f"{task.env_kind} environment, so its state cannot be restored.", status=410)
    if not Deployment.objects.filter(project_id=parent.project_id, active=True).exists():
        raise ApplicationError("This project has no deployed policy yet; deploy a checkpoint first.", status=409)
    branch = Episode.objects.create(project_id=parent.project_id, task=task, seed=parent.seed, mode=mode,
                                    created_by=actor, controller=actor if mode == Mode.SUPERVISED else None,
                                    parent=parent, branched_at=step)
    _episode_state_event(branch)
    episode_enqueue(branch)
    audit_record(actor=actor, action="episode.branch", target=f"episode:{parent.pk}", project_id=parent.project_id,
                 data={"branch": branch.pk, "step": step, "mode": mode})
    return branch


def branches_of(episode: Episode):
    """The episodes branched from this one, oldest first."""
    return (Episode.objects.filter(parent=episode).select_related("task", "checkpoint", "created_by", "controller")
            .order_by("id"))


@transaction.atomic
def episode_claim(*, episode_id: int, worker: str) -> Episode | None:
    """Mark an episode running on this worker, fixing the checkpoint it acts with. None when there is nothing to
    run: finished already, or running on a live worker elsewhere (so a redelivered task is harmless)."""
    episode = Episode.objects.select_for_update().filter(pk=episode_id).first()
    if episode is None or episode.status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED):
        return None
    now = timezone.now()
    stale = now - timedelta(seconds=settings.LOUPE_INTERRUPTED_AFTER_SECONDS)
    if episode.status in (EpisodeStatus.RUNNING, EpisodeStatus.PAUSED) and episode.heartbeat_at and episode.heartbeat_at > stale \
            and episode.worker != worker:
        return None
    if episode.checkpoint_id is None:
        deployment = Deployment.objects.filter(project_id=episode.project_id, active=True).first()
        if deployment is None:
            episode.status, episode.end_reason, episode.finished_at = EpisodeStatus.FAILED, "no deployed policy", now
            episode.save(update_fields=["status", "end_reason", "finished_at"])
            _episode_state_event(episode)
            return None
        episode.checkpoint_id = deployment.checkpoint_id
    episode.status = EpisodeStatus.RUNNING
    episode.worker = worker
    episode.heartbeat_at = now
    episode.started_at = episode.started_at or now
    episode.attempt = F("attempt") + 1
    episode.save(update_fields=["status", "worker", "heartbeat_at", "started_at", "attempt", "checkpoint"])
    _episode_state_event(episode)
    return Episode.objects.select_related("task", "checkpoint", "created_by", "project").get(pk=episode_id)


def episode_heartbeat(*, episode_id: int, worker: str) -> None:
    Episode.objects.filter(pk=episode_id, worker=worker).update(heartbeat_at=timezone.now())


OUTCOME_WORDS = {Outcome.SUCCESS: "the task was done", Outcome.FAILURE: "the task was not done",
                 Outcome.INFEASIBLE: "the task cannot be done"}


def review_reason_of(*, outcome: str, reward: float | None, threshold: float, check_error: str = "") -> str:
    """Why a person should review an episode a person finished with ``outcome`` before it is routed: the task's
    own check paid ``reward``, which says the opposite (``threshold`` and more counts as done), or the check failed.
    "" when they agree, when no person's outcome was given, or when the task has no check of its own."""
    if outcome not in OUTCOME_WORDS:
        return ""
    if reward is None:
        return f"A person finished with {outcome}, and the task's own check failed: {check_error}" if check_error else ""
    if (outcome == Outcome.SUCCESS) == (reward >= threshold):
        return ""
    return (f"A person finished with {outcome} ({OUTCOME_WORDS[outcome]}), but the task's own check paid {reward:g} "
            f"(this project counts {threshold:g} or more as done).")


@transaction.atomic
def episode_finish(*, episode_id: int, status: str, end_reason: str, reward: float | None = None,
                   outcome: str = "", comment: str = "", check_error: str = "") -> Episode:
    """End an episode. Where a person's outcome and the task's own check (``reward``) disagree, the episode keeps
    both and says so in ``review_reason``: routing by reward then waits for a review (rollouts.routing.valid_q)."""
    episode = Episode.objects.select_for_update().select_related("project").get(pk=episode_id)
    if episode.status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED):
        return episode
    episode.status = status
    episode.end_reason = end_reason[:300]
    episode.env_reward = reward
    episode.outcome = outcome or episode.outcome
    episode.comment = comment or episode.comment
    episode.finished_at = timezone.now() if status in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED) else None
    if status == EpisodeStatus.FINISHED:
        episode.review_reason = review_reason_of(
            outcome=episode.outcome, reward=reward, check_error=check_error,
            threshold=routing_of(episode.project)["reward_threshold"])
    episode.save(update_fields=["status", "end_reason", "env_reward", "outcome", "comment", "finished_at",
                                "review_reason"])
    _episode_state_event(episode)
    if episode.finished_at:
        event_append(episode_id=episode.pk, type="episode.finished",
                     payload={"status": status, "end_reason": episode.end_reason, "reward": reward,
                              "outcome": episode.outcome})
        signals.episode_finished.send(sender=Episode, episode=episode)  # the judge queues its verdict
    return episode


def episodes_mark_interrupted(*, older_than_seconds: float) -> list[int]:
    """Episodes whose worker stopped heartbeating: interrupted, every step kept, resumable."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    interrupted = []
    stale = Episode.objects.filter(status__in=[EpisodeStatus.RUNNING, EpisodeStatus.PAUSED], heartbeat_at__lt=cutoff)
    for episode_id in stale.values_list("pk", flat=True):
        with transaction.atomic():
            episode = Episode.objects.select_for_update(skip_locked=True).filter(
                pk=episode_id, status__in=[EpisodeStatus.RUNNING, EpisodeStatus.PAUSED], heartbeat_at__lt=cutoff).first()
            if episode is None:
                continue
            episode.status = EpisodeStatus.INTERRUPTED
            episode.end_reason = f"worker {episode.worker or '?'} stopped responding"
            episode.save(update_fields=["status", "end_reason"])
            _episode_state_event(episode)
            interrupted.append(episode.pk)
    return interrupted


@transaction.atomic
def episode_resume(*, episode: Episode, actor) -> Episode:
    if episode.status != EpisodeStatus.INTERRUPTED:
        raise ApplicationError(f"Only an interrupted episode can be resumed; this one is {episode.status}.", status=409)
    Episode.objects.filter(pk=episode.pk).update(status=EpisodeStatus.QUEUED, worker="", heartbeat_at=None)
    episode.refresh_from_db()
    _episode_state_event(episode)
    audit_record(actor=actor, action="episode.resume", target=f"episode:{episode.pk}", project_id=episode.project_id)
    episode_enqueue(episode)
    return episode


# --- live control (called by the human layer) ------------------------------------------------------
def _episode_update_and_announce(episode_id: int, **fields) -> Episode:
    Episode.objects.filter(pk=episode_id).update(**fields)
    episode = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").get(pk=episode_id)
    _episode_state_event(episode, fresh=True)
    return episode


@transaction.atomic
def episode_control_set(*, episode_id: int, controller=None, human_control: bool | None = None,
                        status: str | None = None) -> Episode:
    fields = {"controller": controller}
    if human_control is not None:
        fields["human_control"] = human_control
    if status is not None:
        fields["status"] = status
    episode = _episode_update_and_announce(episode_id, **fields)
    event_append(episode_id=episode_id, type="control.changed", payload={
        "control": {"username": controller.username} if controller else None, "human_control": episode.human_control})
    return episode


@transaction.atomic
def episode_live_state_set(*, episode_id: int, status: str | None = None, human_control: bool | None = None,
                           screen: tuple[int, int] | None = None, instruction: str | None = None) -> Episode:
    """Change what watchers see of a running episode (status, who acts, the screen's size, the instruction the
    environment gave) and tell them with an ``episode.state`` event."""
    fields = {}
    if instruction is not None:  # stored redacted, as a step's is
        settings = Episode.objects.filter(pk=episode_id).values_list("project__settings", flat=True).first()
        fields["instruction"] = privacy.text_redact(settings=settings, text=instruction)
    if status is not None:
        fields["status"] = status
    if human_control is not None:
        fields["human_control"] = human_control
    if screen is not None:
        fields["screen_width"], fields["screen_height"] = screen
    episode = _episode_update_and_announce(episode_id, **fields)
    if human_control is not None:
        event_append(episode_id=episode_id, type="control.changed", payload={
            "control": {"username": episode.controller.username} if episode.controller_id else None,
            "human_control": episode.human_control})
    return episode


@transaction.atomic
def episode_outcome_set(*, episode_id: int, outcome: str, comment: str = "") -> None:
    settings = Episode.objects.filter(pk=episode_id).values_list("project__settings", flat=True).first()
    Episode.objects.filter(pk=episode_id).update(outcome=outcome,
                                                 comment=privacy.text_redact(settings=settings, text=comment))


def episode_review_summary_set(*, episode_id: int, verdicts: list[str], grades: list[int],
                               final_verdict: str = "", step_labels: list[dict] | None = None) -> Episode:
    """Annotation's conclusion about an episode, written onto it: review counts and the status that
    routing reads (accepted / rejected when every reviewer agrees, disputed when they do not). A
    manager's adjudicated ``final_verdict`` decides the status whatever the reviews say. ``step_labels``: each
    review that labelled steps, ``{"reviewer", "verdict", "labels": {"<index>": label}}`` (the PRM export reads
    them, snapshots.buckets)."""
    accepts, rejects = verdicts.count("accept"), verdicts.count("reject")
    if final_verdict:
        review_status = ReviewStatus.ACCEPTED if final_verdict == "accept" else ReviewStatus.REJECTED
    elif not verdicts:
        review_status = ReviewStatus.UNREVIEWED
    elif accepts and rejects:
        review_status = ReviewStatus.DISPUTED
    else:
        review_status = ReviewStatus.ACCEPTED if accepts else ReviewStatus.REJECTED
    summary = {"reviews": len(verdicts), "accepts": accepts, "rejects": rejects,
               "grade_mean": round(sum(grades) / len(grades), 2) if grades else None}
    if final_verdict:
        summary["final_verdict"] = final_verdict
    if step_labels:
        summary["step_labels"] = step_labels
    Episode.objects.filter(pk=episode_id).update(review_summary=summary, review_status=review_status)
    return Episode.objects.get(pk=episode_id)
