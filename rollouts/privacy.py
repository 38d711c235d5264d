"""Personal data is redacted where it is first stored (issue 40): a step's and a rejected proposal's texts (the
observation's element text, URL and screen text, the instruction, the typed action, thoughts, the raw output,
the reason) and its screenshot (filled over the elements whose text matched, core.redaction) are stored redacted
by the project's policy, so whatever reads them (the review and replay pages, the live view's history, datasets
and exports, a branch's copy) reads the redacted copy, and no path can forget to redact.

The policy acting during an episode sees the real screen (the env's observation, never a stored step). A stored
step's token ids go where its raw output was changed: they would spell what was hidden.

What redaction changed is kept apart only where the project's policy says ``keep_originals`` (switched on by an
admin with a reason): in storage under ``originals/`` (never served but by :func:`original_read`, for the
project's admins, every read audited) -- and read back, audited, to replay a step whose typed text was hidden
(resuming or branching an episode types what was typed, not its label)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from agent.images import image_bytes, image_url, map_image_urls
from core import redaction
from core.audit import audit_record
from core.errors import ApplicationError
from projects.models import Role
from rollouts.models import Event
from rollouts.screenshots import screenshot_store

ORIGINALS = "originals/episodes"


@dataclass
class Stored:
    """A record's fields as stored: redacted (``fields``, ``screenshot``, ``prompt``), and what redaction changed
    as it was (``originals``: field -> value, ``screenshot`` -> bytes; empty when nothing changed)."""

    fields: dict
    screenshot: bytes | None
    prompt: list | None
    originals: dict


def _by_original(data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    return f"redacted/of/{digest[:2]}/{digest}"


def record_redact(*, settings: dict | None, fields: dict, screenshot: bytes | None = None,
                  prompt: list | None = None) -> Stored:
    """``fields`` (texts and JSON; ``elements`` decide the screenshot's boxes), ``screenshot`` and ``prompt`` as the
    project's policy lets them be stored. A redacted screenshot is also kept by the original's hash, so a later
    prompt that shows it again (history_images) shows the redacted copy."""
    policy = redaction.policy_of(settings)
    if not policy.enabled:
        return Stored(fields, screenshot, prompt, {})
    shot = screenshot
    boxes = redaction.element_boxes(fields.get("elements") or [], policy) if screenshot else []
    if boxes:
        shot = redaction.image_redact(screenshot, boxes)
        name = _by_original(screenshot)
        if not default_storage.exists(name):
            default_storage.save(name, ContentFile(shot))
    out = redaction.tokens_dropped(fields, {key: redaction.value_redact(value, policy)
                                            for key, value in fields.items()})
    if prompt:
        def image(url: str) -> str:
            try:
                data = image_bytes(url)
            except ValueError:
                return url
            if data == screenshot:
                return image_url(shot)
            name = _by_original(data)
            if default_storage.exists(name):
                with default_storage.open(name, "rb") as handle:
                    return image_url(handle.read())
            return url

        prompt = redaction.value_redact(map_image_urls(prompt, image), policy)
    originals = {key: value for key, value in fields.items()
                 if out[key] != value and key not in ("token_ids", "token_logprobs")}
    if boxes:
        originals["screenshot"] = screenshot
    return Stored(out, shot, prompt, originals if policy.keep_originals else {})


def step_redact(*, episode, index: int, fields: dict, screenshot: bytes | None, prompt: list) -> Stored:
    """A step's record as stored (rollouts.steps.step_record's hook); its originals kept where the project allows
    (they are written before the step's transaction commits: an original of a step rolled back is an orphan file
    only admins can reach)."""
    stored = record_redact(settings=episode.project.settings, fields=fields, screenshot=screenshot, prompt=prompt)
    _proposals_redact(episode=episode, index=index, original=screenshot, redacted=stored.screenshot)
    if stored.originals:
        base = f"{ORIGINALS}/{episode.pk}/{index}"
        originals = dict(stored.originals)
        shot = originals.pop("screenshot", None)
        _replace(f"{base}/step.json", json.dumps(originals, ensure_ascii=False).encode())
        if shot:
            _replace(f"{base}/screenshot", shot)
    return stored


_PROPOSAL_TEXTS = ("thought", "action", "action_text", "raw", "url")


def _proposals_redact(*, episode, index: int, original: bytes | None, redacted: bytes | None) -> None:
    """The ``step.proposed`` events of step ``index``, once it is stored: shown live as they came (the person
    deciding sees what the model would type, on the real screen), kept redacted like the step (a watcher who
    connects later, and the episode's history, read these). A proposal's screen that was not the step's and
    that nothing redacted before is dropped from its event: no elements are known to redact it by."""
    policy = redaction.policy_of(episode.project.settings)
    if not policy.enabled:
        return
    events = list(Event.objects.filter(episode=episode, type="step.proposed", payload__index=index))
    if not events:
        return  # (and the original screen is never written to storage)
    own = screenshot_store(original) if original else None  # stored already when the proposal was shown
    for event in events:
        payload = {**event.payload, **{key: redaction.value_redact(event.payload[key], policy)
                                       for key in _PROPOSAL_TEXTS if key in event.payload}}
        name = payload.get("screenshot") or ""
        if name and name == own:
            payload["screenshot"] = screenshot_store(redacted)
        elif name:
            with default_storage.open(name, "rb") as handle:
                kept = _by_original(handle.read())
            if default_storage.exists(kept):
                with default_storage.open(kept, "rb") as handle:
                    payload["screenshot"] = screenshot_store(handle.read())
            else:
                payload["screenshot"], payload["screenshot_url"] = "", ""
        if payload != event.payload:
            Event.objects.filter(pk=event.pk).update(payload=payload)


def text_redact(*, settings: dict | None, text: str) -> str:
    """A free text (a review comment, an outcome's comment) as the project's policy lets it be stored."""
    return redaction.text_redact(text, redaction.policy_of(settings))


def value_redact(*, settings: dict | None, value):
    """Any JSON (a command's payload, an intervention's turns) as the project's policy lets it be stored."""
    return redaction.value_redact(value, redaction.policy_of(settings))


def _replace(name: str, data: bytes) -> None:
    if default_storage.exists(name):
        default_storage.delete(name)
    default_storage.save(name, ContentFile(data))


def originals_of(episode_id: int, index: int) -> dict | None:
    name = f"{ORIGINALS}/{episode_id}/{index}/step.json"
    if not default_storage.exists(name):
        return None
    with default_storage.open(name, "rb") as handle:
        return json.loads(handle.read())


def original_read(*, step, project_id: int, actor, role: str, reason: str) -> dict:
    """What redaction changed of ``step`` as it was (``fields``, and the screenshot as a data URL or None): the
    project's admins only, with a reason, every read audited. 404 where the project kept nothing of it."""
    if role != Role.ADMIN:
        raise ApplicationError("Only an admin of this project can read what redaction hid; the stored step is "
                               "what managers and reviewers see.", status=403)
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError("Say why you read what redaction hid (the reason is kept in the audit log).",
                               errors={"reason": ["Required."]})
    fields = originals_of(step.episode_id, step.index)
    shot_name = f"{ORIGINALS}/{step.episode_id}/{step.index}/screenshot"
    shot = None
    if default_storage.exists(shot_name):
        with default_storage.open(shot_name, "rb") as handle:
            shot = image_url(handle.read())
    if fields is None and shot is None:
        raise ApplicationError("Nothing of this step was kept as it was: redaction changed nothing, or the project "
                               "does not keep originals.", status=404)
    audit_record(actor=actor, action="original.read", target=f"episode:{step.episode_id}", project_id=project_id,
                 data={"step": step.index, "reason": reason[:500], "fields": sorted(fields or {})})
    return {"episode": step.episode_id, "step": step.index, "fields": fields or {}, "screenshot": shot}


def replay_actions(*, project, steps) -> list[dict | None]:
    """The actions of stored ``steps`` (of ``project``'s episodes) as a replay executes them:
    a step whose typed text was redacted replays its kept original (audited, the replay reading it); without one,
    ApplicationError says which step cannot be replayed and why."""
    out = []
    for step in steps:
        action = step.action
        if action and _labelled(project.settings, action):
            original = (originals_of(step.episode_id, step.index) or {}).get("action")
            if original is None:
                raise ApplicationError(
                    f"step {step.index + 1} typed personal data that was redacted when it was stored, and the project "
                    "keeps no originals: replaying it would type the label instead; start a new episode")
            audit_record(actor=None, action="original.read", target=f"episode:{step.episode_id}",
                         project_id=project.pk,
                         data={"step": step.index, "reason": "replay", "fields": ["action"]})
            action = original
        out.append(action)
    return out


def _labelled(settings: dict | None, value) -> bool:
    labels = redaction.policy_of(settings).labels
    return bool(labels.search(json.dumps(value, ensure_ascii=False)))


def observation_as_stored(*, settings: dict | None, observation):
    """An env's observation as a step of it is stored (elements' text and the screenshot redacted), to compare with
    a stored step (a branch's replay check): like with like."""
    policy = redaction.policy_of(settings)
    if not policy.enabled:
        return observation
    elements = [element.to_dict() for element in observation.elements]
    boxes = redaction.element_boxes(elements, policy)
    screenshot = redaction.image_redact(observation.screenshot, boxes) if boxes else observation.screenshot
    return dataclasses.replace(
        observation, screenshot=screenshot,
        elements=[dataclasses.replace(e, text=redaction.text_redact(e.text, policy)) for e in observation.elements])


