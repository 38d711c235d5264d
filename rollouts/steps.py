"""A step and what happened around it: each executed step stored with its event (``step_record``), the proposals a
person rejected before it, a proposal waiting for a person, payloads for the API and the live page, and prompts
stored with their screenshots as references."""
from __future__ import annotations

from collections.abc import Callable

from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import F, Prefetch
from django.utils import timezone

from agent.formats import FORMATS
from agent.images import image_bytes, image_url, map_image_urls
from core.errors import ApplicationError
from rollouts import privacy
from rollouts.events import event_append
from rollouts.models import Actor, Correction, CorrectionReplay, Episode, Rejection, Step
from rollouts.screenshots import screenshot_store


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
        "learned": step_learned(step),
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
    stored = privacy.record_redact(settings=episode.project.settings, prompt=prompt, fields=dict(  # rollouts/privacy.py
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
    # stored redacted by the project's policy (rollouts/privacy.py): whatever reads the step reads the redacted copy
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


def step_words_wanted(step: Step) -> bool:
    """Whether a step keeps the think-aloud words said during it as its human thought: one a person acted on or
    approved (an autonomous step's words stay only in the transcript)."""
    return step_has_person(step)


def step_learned(step: Step) -> list[dict]:
    """Per cycle that replayed this corrected step: whether its candidate learned it (the API's and export's
    ``learned``)."""
    replays = getattr(step, "replays_in_order", None)  # fetched with the steps of a snapshot (datasets._steps_of)
    if replays is None:
        replays = step.correction_replays.all()
    return [{"cycle": r.cycle_id, "learned": r.learned, "held_out": r.held_out} for r in replays]


# --- polishing -------------------------------------------------------------------------------------------------
def step_has_person(step: Step) -> bool:
    """A person acted on the step (took over or edited it) or approved the model's proposal: its words are theirs
    about it."""
    return step.actor != Actor.MODEL or step.intervened_by_id is not None


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
