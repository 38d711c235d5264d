"""Episodes and their steps: starting them in their lane, a worker claiming and finishing them, each executed
step and rejected proposal stored with its event, and the live state people change (control, pause, outcome)."""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Prefetch
from django.utils import timezone

from agent.formats import FORMATS
from agent.prompt import image_bytes, image_url, map_image_urls
from core.audit import audit_record
from core.errors import ApplicationError
from flywheel import judge, learned, polish, privacy, selectors
from flywheel.routing import routing_of
from flywheel.events import event_append
from flywheel.models import (Actor, Correction, CorrectionReplay, Deployment, Episode, EpisodeStatus, Mode, Outcome,
                             Rejection, ReviewStatus, Step)

class EpisodeStop(Exception):
    """Raised by a supervisor to end an episode early with `status` (e.g. interrupted when nobody is there)."""

    status = EpisodeStatus.INTERRUPTED


MAX_BATCH = 500
# People never wait behind machines: a supervised episode runs on the `live` queue, which workers kept for
# people consume, and autonomous ones on `rollouts`, however many a batch queued.
LANES = {Mode.SUPERVISED: "live", Mode.AUTONOMOUS: "rollouts"}


def episode_enqueue(episode: Episode) -> None:
    """Send an episode to its lane's workers once the surrounding transaction commits."""
    from flywheel import tasks as rollout_tasks

    queue = LANES.get(episode.mode, "rollouts")
    transaction.on_commit(lambda: rollout_tasks.episode_run.apply_async((episode.pk,), queue=queue))


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
    from flywheel.task_files import start_refusal

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
    from agent.envs import tasks_for

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


def step_copy(*, branch: Episode, source: Step, screenshot: bytes, width: int, height: int, url: str) -> Step:
    """Store one of a branch's replayed steps: the parent's step ``source`` as it was decided (actor, thought,
    action, prompt, tokens, checkpoint), on the screen the branch saw when replaying it (``screenshot``: checked
    to be the parent's), its info saying ``replayed_from`` {episode, step}. Idempotent like step_record."""
    step = step_record(
        episode=branch, index=source.index, screenshot=screenshot, width=width, height=height, url=url,
        instruction=source.instruction, elements=source.elements, prompt=source.prompt, raw_output=source.raw_output,
        token_ids=source.token_ids, token_logprobs=source.token_logprobs, thought=source.thought,
        action=source.action, action_text=source.action_text, actor=source.actor, proposal=source.proposal,
        reward=source.reward, done=source.done, void_reason=source.void_reason or None,
        info={**(source.info or {}), "replayed_from": {"episode": source.episode_id, "step": source.index}},
        timings=source.timings, intervened_by=source.intervened_by, action_format=source.action_format,
        screen_text=source.screen_text, feedback=source.feedback, confidence=source.confidence,
        confidence_margin=source.confidence_margin)
    if step.checkpoint_id != source.checkpoint_id:
        Step.objects.filter(pk=step.pk).update(checkpoint_id=source.checkpoint_id)
    return step


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


def screenshot_store(data: bytes) -> str:
    """Store a screenshot by its content hash; the same image is stored once."""
    digest = hashlib.sha256(data).hexdigest()
    name = f"screenshots/{digest[:2]}/{digest}.jpg"
    if not default_storage.exists(name):
        default_storage.save(name, ContentFile(data))
    return name


IMAGE_REF = "loupe-storage:"  # an image part's URL in a stored prompt: this, then the screenshot's storage name


def prompt_for_storage(prompt: list) -> list:
    """``prompt`` as a step or rejection stores it: the messages exactly as sent, but each ``data:`` image URL
    replaced by ``loupe-storage:<name>``, ``<name>`` being the Django storage name of those very bytes (stored by
    content hash, so the current screenshot is the step's own ``screenshot`` file and an earlier one that step's;
    stored here if new). A step's prompt keeps a few hundred bytes a screenshot instead of its base64."""
    def reference(url: str) -> str:
        return IMAGE_REF + screenshot_store(image_bytes(url)) if url.startswith("data:") else url

    return map_image_urls(prompt, reference)


def prompt_as_sent(prompt: list) -> list:
    """A stored prompt as the policy was sent it: each ``loupe-storage:<name>`` image URL back to the ``data:`` URL
    of the stored file's bytes (``default_storage.open(name)``; training rows that want files rather than base64
    read the same names). ApplicationError names a screenshot that is missing from storage."""
    def data_url(url: str) -> str:
        if not url.startswith(IMAGE_REF):
            return url
        name = url[len(IMAGE_REF):]
        try:
            with default_storage.open(name) as handle:
                return image_url(handle.read())
        except (FileNotFoundError, OSError):
            raise ApplicationError(f"The screenshot {name} of a stored prompt is missing from storage.",
                                   status=500) from None

    return map_image_urls(prompt, data_url)


def _format_check(action_format: str) -> None:
    if action_format not in FORMATS:
        raise ApplicationError(f"Unknown action format '{action_format}'; use one of {', '.join(FORMATS)}.")


def turn_payload(turn) -> dict | None:
    """An agent Turn as JSON: how proposals and corrections are stored."""
    if turn is None:
        return None
    return {"thought": turn.thought, "action": turn.action.to_dict() if turn.action else None,
            "action_text": turn.action.to_text() if turn.action else "", "raw": turn.raw,
            "void_reason": turn.void_reason}


def rejection_payload(rejection: Rejection) -> dict:
    return {"attempt": rejection.attempt, "thought": rejection.thought, "action": rejection.action,
            "action_text": rejection.action_text, "void_reason": rejection.void_reason, "reason": rejection.reason,
            "action_format": rejection.action_format,
            "repeated": rejection.repeated, "confidence": rejection.confidence,
            "confidence_margin": rejection.confidence_margin,
            "rejected_by": rejection.rejected_by.username if rejection.rejected_by_id else None,
            "created_at": rejection.created_at.isoformat() if rejection.created_at else None}


def steps_with_rejections(episode: Episode):
    """The episode's steps in order, each with its rejected proposals prefetched (for step_payload)."""
    return episode.steps.order_by("index").prefetch_related(
        Prefetch("rejections", queryset=Rejection.objects.select_related("rejected_by").order_by("attempt")),
        Prefetch("correction_replays", queryset=CorrectionReplay.objects.order_by("cycle_id")))


def step_payload(step: Step) -> dict:
    return {
        "index": step.index, "actor": step.actor, "thought": step.thought, "action": step.action,
        "action_text": step.action_text, "void": step.void, "void_reason": step.void_reason,
        "proposal": step.proposal, "correction": step.correction, "action_format": step.action_format,
        "rejections": [rejection_payload(r) for r in step.rejections.all()],
        "reward": step.reward, "done": step.done,
        "screenshot_url": f"/api/v1/episodes/{step.episode_id}/steps/{step.index}/screenshot" if step.screenshot else "",
        "width": step.width, "height": step.height, "url": step.url, "human_thought": step.human_thought,
        "episode": step.episode_id, "polished_thought": step.polished_thought, "polish_state": step.polish_state,
        "polish_error": step.polish_error,
        "info": step.info, "timings": step.timings,
        "confidence": step.confidence, "confidence_margin": step.confidence_margin,
        "learned": learned.step_learned(step),
        "created_at": step.created_at.isoformat() if step.created_at else None,
    }


def correction_of(*, actor: str, action: dict | None, thought: str, proposal: dict | None) -> str:
    """What a person's turn changed of the model's proposal (Correction): its action; only its thought (an
    edit that rewrote the reasoning); or nothing (a takeover that did what the model proposed)."""
    if actor == Actor.MODEL or proposal is None:
        return Correction.NONE
    if action != proposal.get("action"):
        return Correction.ACTION
    if actor == Actor.EDITED and " ".join(thought.split()) != " ".join((proposal.get("thought") or "").split()):
        return Correction.THOUGHT
    return Correction.SAME


@transaction.atomic
def rejection_record(*, episode: Episode, index: int, attempt: int, prompt: list, raw_output: str,
                     token_ids: list[int], token_logprobs: list[float], thought: str, action: dict | None,
                     action_text: str, void_reason: str | None, reason: str, repeated: bool,
                     rejected_by=None, action_format: str = "loupe", confidence: float | None = None,
                     confidence_margin: float | None = None) -> Rejection:
    """Store a proposal a person rejected. Idempotent on (episode, step, attempt): a resumed episode that
    proposes its step again numbers its proposals after the ones already stored. ``raw_output`` was read in
    ``action_format``; the prompt's screenshots are stored as references (prompt_for_storage)."""
    _format_check(action_format)
    existing = Rejection.objects.filter(episode=episode, step_index=index).order_by("-attempt").first()
    if existing is not None and existing.attempt >= attempt:
        attempt = existing.attempt + 1
    stored = privacy.record_redact(settings=episode.project.settings, prompt=prompt, fields=dict(  # flywheel/privacy.py
        raw_output=raw_output, token_ids=token_ids, token_logprobs=token_logprobs, thought=thought, action=action,
        action_text=action_text, reason=reason))
    return Rejection.objects.create(
        episode=episode, step_index=index, attempt=attempt, prompt=prompt_for_storage(stored.prompt),
        action_format=action_format, **stored.fields, void_reason=(void_reason or "")[:300],
        repeated=repeated, rejected_by=rejected_by, checkpoint_id=episode.checkpoint_id, confidence=confidence,
        confidence_margin=confidence_margin)


def rejections_of(*, episode_id: int, index: int) -> list[Rejection]:
    """The proposals rejected so far at one step of an episode, oldest first."""
    return list(Rejection.objects.filter(episode_id=episode_id, step_index=index).select_related("rejected_by")
                .order_by("attempt"))


def json_safe(value):
    """``value`` as JSON can hold it: keys as strings, tuples as lists, anything else as its str() (an env's info)."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


@transaction.atomic
def step_record(*, episode: Episode, index: int, screenshot: bytes, width: int, height: int, url: str,
                instruction: str, elements: list[dict], prompt: list, raw_output: str, token_ids: list[int],
                token_logprobs: list[float], thought: str, action: dict | None, action_text: str, actor: str,
                proposal: dict | None, reward: float, done: bool, void_reason: str | None, info: dict,
                timings: dict, intervened_by=None, started_at=None, action_format: str = "loupe",
                screen_text: str = "", feedback: str = "", linked: Callable[[Step], None] | None = None,
                confidence: float | None = None, confidence_margin: float | None = None) -> Step:
    """Store one executed step and its event. Idempotent on (episode, index): a replayed step is not stored twice.
    ``raw_output`` was read in ``action_format``; the prompt's screenshots are stored as references to the
    screenshot files (prompt_for_storage), the current one being this step's ``screenshot``. The step's rejected
    proposals, and whatever ``linked`` links to it (a supervisor's interventions), join it in this transaction."""
    if actor not in Actor.values:
        raise ApplicationError(f"Unknown actor '{actor}'.")
    _format_check(action_format)
    existing = Step.objects.filter(episode=episode, index=index).first()
    if existing is not None:
        if linked is not None:
            linked(existing)
        return existing
    correction = correction_of(actor=actor, action=action, thought=thought, proposal=proposal)
    # stored redacted by the project's policy (flywheel/privacy.py): whatever reads the step reads the redacted copy
    stored = privacy.step_redact(episode=episode, index=index, screenshot=screenshot, prompt=prompt, fields=dict(
        url=url, instruction=instruction, elements=elements, screen_text=screen_text, feedback=feedback,
        raw_output=raw_output, token_ids=token_ids, token_logprobs=token_logprobs, thought=thought, action=action,
        action_text=action_text, proposal=proposal, info=json_safe(info)))
    screenshot, instruction = stored.screenshot, stored.fields["instruction"]
    step = Step.objects.create(
        episode=episode, index=index, screenshot=screenshot_store(screenshot) if screenshot else "", width=width,
        height=height, prompt=prompt_for_storage(stored.prompt), action_format=action_format, actor=actor,
        correction=correction, reward=reward, done=done, **{**stored.fields, "url": stored.fields["url"][:500]},
        void=action is None, void_reason=(void_reason or "")[:300], timings=timings,
        checkpoint_id=episode.checkpoint_id, intervened_by=intervened_by, started_at=started_at,
        confidence=confidence, confidence_margin=confidence_margin,
    )
    Rejection.objects.filter(episode=episode, step_index=index, step__isnull=True).update(step=step)
    if linked is not None:
        linked(step)
    # a person's step that did what the model proposed is not a correction; rejections before it are, and so is a
    # step a person took in control with no proposal to compare (a takeover: the person acted in the model's place)
    took_over = actor == Actor.HUMAN and proposal is None
    corrected = correction in (Correction.ACTION, Correction.THOUGHT) or took_over or step.rejections.exists()
    known = {"instruction": instruction} if instruction and not episode.instruction else {}
    Episode.objects.filter(pk=episode.pk).update(
        n_steps=F("n_steps") + 1, n_void=F("n_void") + (1 if action is None else 0),
        n_interventions=F("n_interventions") + (1 if corrected else 0), heartbeat_at=timezone.now(), **known,
    )
    if known:  # an episode run without a supervisor learns its instruction from its first step
        episode.instruction = instruction
    step = steps_with_rejections(episode).get(pk=step.pk)
    event_append(episode_id=episode.pk, type="step.executed", payload=step_payload(step))
    return step


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
    both and says so in ``review_reason``: routing by reward then waits for a review (flywheel.routing.valid_q)."""
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
        judge.judge_after_finish(episode)  # queued after the commit, when the project judges every episode
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
def proposal_open(*, episode: Episode, index: int, turn: dict, screenshot: bytes, width: int, height: int,
                  url: str, reason: str = "", repeated: bool = False, confidence: float | None = None) -> None:
    """A model proposal now waits for a person: stored as a `step.proposed` event, shown to every watcher.
    After rejects it carries which proposal of the step it is (`attempt`), the rejected ones, and whether
    it repeats one of them (`repeated`)."""
    name = screenshot_store(screenshot) if screenshot else ""
    Episode.objects.filter(pk=episode.pk).update(pending_index=index, screen_width=width, screen_height=height)
    rejected = [rejection_payload(r) for r in rejections_of(episode_id=episode.pk, index=index)]
    event_append(episode_id=episode.pk, type="step.proposed", payload={
        "index": index, **turn, "width": width, "height": height, "url": url, "reason": reason,
        "attempt": len(rejected) + 1, "rejected": rejected, "repeated": repeated, "confidence": confidence,
        "screenshot_url": f"/api/v1/episodes/{episode.pk}/proposals/{index}/screenshot" if name else "",
        "screenshot": name,
    })


def proposal_close(*, episode: Episode) -> None:
    Episode.objects.filter(pk=episode.pk).update(pending_index=None)


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


def step_words_wanted(step: Step) -> bool:
    """Whether a step keeps the think-aloud words said during it as its human thought: one a person acted on or
    approved (an autonomous step's words stay only in the transcript)."""
    return polish.step_has_person(step)


@transaction.atomic
def step_human_thought_set(*, step: Step, text: str) -> Step:
    """Store the words said during a step, raw, and queue their polish into a thought (flywheel/polish.py)."""
    step.human_thought = text
    step.save(update_fields=["human_thought"])
    polish.polish_after_words(step)
    return step


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
    them, flywheel.datasets)."""
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
