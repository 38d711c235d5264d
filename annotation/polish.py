"""Think-aloud polished into thoughts (issue 21, item 2): the words a person said aloud during a step they acted on
or approved (``Step.human_thought``, raw, never changed here) rewritten as a thought in the model's style, stored
beside them as ``Step.polished_thought``; rows use it where present (``snapshots.rows.step_thought``).

When a step's words change (annotation/audio.py aligns committed words to steps, through
``step_human_thought_set``) its polish is queued on the ``default`` queue (``tasks.step_polish``). The
task is safe to run twice: it polishes only a step whose state is ``queued`` (or whose stored polish came from
older words), and stores its result only if the words are still the ones it polished and nobody edited the thought
meanwhile. A person's edit (``edited``) is never overwritten by new words; only an explicit request replaces it.

Backends (``Project.settings["polish"]``, ``GET/PATCH /api/v1/projects/<id>/polish``):
  ``cleanup`` (the CPU default, no model): drops fillers (um, uh, you know, a leading "okay so"), false starts
  ("cl-", a phrase said again) and repeated words, capitalises and punctuates; the first person stays.
  ``openai``: the model on an OpenAI-compatible server (the policy endpoint, ``LOUPE_OPENAI_*``, as the judge
  reaches it) is asked for one ``Thought:`` line; an empty, garbled or late answer fails the polish with why.
"""
from __future__ import annotations

import logging
import math
import re
from datetime import timedelta

from django.conf import settings as django_settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from core.audit import audit_record
from core.errors import ApplicationError
from agent.policies import make_policy
from core.jobs import job
from projects.models import Project
from projects.project_settings import Section, section_of, section_set
from projects.selectors import role_at_least
from rollouts import privacy
from rollouts.models import Episode, PolishState, Step

log = logging.getLogger(__name__)

BACKENDS = ("cleanup", "openai")
DEFAULT_POLISH = {"enabled": True, "backend": "cleanup", "model": "", "base_url": "", "timeout_seconds": None,
                  "retries": None}
MAX_WORDS_CHARS = 4000  # what a polisher reads of a step's words (a step someone talked through for minutes)
MAX_THOUGHT_CHARS = 1000  # a polished thought, written or edited
REQUEUE_AFTER_SECONDS = 120  # a second request for a step queued this recently is the same request


class PolishFailed(Exception):
    """A polisher gave no thought; the message says why, in plain words, and is shown on the step."""


# --- the cleanup backend: deterministic, no model ------------------------------------------------------------
FILLERS = {"um", "umm", "uh", "uhh", "uhm", "erm", "er", "ah", "ahh", "hmm", "hm", "mm", "mhm", "eh"}
LEADING = {"so", "okay", "ok", "well", "alright", "right", "like", "now"}  # only at a clause's start, before a comma
OPENERS = {"okay", "ok", "alright", "so"}  # dropped at a clause's start even without a comma ("okay so I click")
_END = ".!?"
_PUNCT = ".,!?;:…"


def _core(token: str) -> str:
    return token.strip(_PUNCT + "\"'“”()").lower()


def _tail(token: str) -> str:
    stripped = token.rstrip(_PUNCT)
    return token[len(stripped):]


def _clause_start(out: list[str]) -> bool:
    return not out or any(c in _tail(out[-1]) for c in _END + ",;:")


def _end_at_previous(out: list[str], tail: str) -> None:
    """A dropped token ended a sentence ('... it, um.'): the previous kept token ends it instead."""
    ends = "".join(c for c in tail if c in _END)
    if ends and out:
        out[-1] = out[-1].rstrip(_PUNCT) + ends[0]


def _drop_fillers(tokens: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token, core = tokens[i], _core(tokens[i])
        pair = (core, _core(tokens[i + 1])) if i + 1 < len(tokens) else None
        if not core or core.endswith("-") or token.endswith(("-", "—")):  # a bare mark, or a word broken off
            _end_at_previous(out, _tail(token))
            i += 1
            continue
        if core in FILLERS:
            _end_at_previous(out, _tail(token))
            i += 1
            continue
        if pair in (("you", "know"), ("i", "mean")):
            after = tokens[i + 1]
            if pair == ("you", "know") and (_tail(after) or i + 2 == len(tokens) or _clause_start(out)) \
                    or pair == ("i", "mean") and "," in _tail(after):
                _end_at_previous(out, _tail(after))
                i += 2
                continue
        if _clause_start(out) and (core in OPENERS or core in LEADING and "," in _tail(token)) and i + 1 < len(tokens):
            i += 1
            continue
        out.append(token)
        i += 1
    return out


def _drop_repeats(tokens: list[str]) -> list[str]:
    """'the the button' -> 'the button'; 'I want, I want to click' -> 'I want to click': a phrase of up to three
    words said again at once keeps its second saying (the first was a false start)."""
    out: list[str] = []
    for token in tokens:
        out.append(token)
        for n in (3, 2, 1):
            if len(out) >= 2 * n:
                first, second = out[-2 * n:-n], out[-n:]
                if [_core(t) for t in first] == [_core(t) for t in second] \
                        and not any(c in _END for t in first for c in _tail(t)):
                    del out[-2 * n:-n]
                    break
    return out


def _sentences(text: str) -> str:
    text = re.sub(r"\s+([,.!?;:])", r"\1", text)
    text = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", text)
    text = re.sub(r"[,;:]\s*([.!?])", r"\1", text)
    text = re.sub(r"^[\s,;:.]+", "", text).strip()
    text = re.sub(r"\bi\b", "I", text)
    text = re.sub(r"\bi'(m|ll|d|ve)\b", lambda m: "I'" + m.group(1), text)
    text = re.sub(r"(^|[.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)
    if text and text[-1] in ",;:":
        text = text[:-1]
    if text and text[-1] not in _END + "…":
        text += "."
    return text


def _cap(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at the last sentence (else word) that fits."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "))
    if end > limit // 2:
        return cut[:end + 1]
    return cut[:cut.rfind(" ")].rstrip(_PUNCT) + "…"


def cleanup(words: str) -> str:
    """The ``cleanup`` polish of what someone said (see the module's docstring); "" when nothing but fillers was
    said."""
    tokens = _drop_repeats(_drop_fillers(_cap(" ".join(words.split()), MAX_WORDS_CHARS).split()))
    if not any(_core(t) for t in tokens):
        return ""
    return _cap(_sentences(" ".join(tokens)), MAX_THOUGHT_CHARS)


# --- the openai backend ----------------------------------------------------------------------------------------
POLISH_SYSTEM = (
    "You turn what a person said aloud while operating a computer into the thought a GUI agent writes before its "
    "action. Keep their reasoning and the first person; leave out fillers, false starts and repetitions; add "
    "nothing they did not say. Write one to three short sentences, e.g. 'The form needs a user name first, so I "
    "click the first field.'\n"
    "Answer with exactly one line and nothing else:\n"
    "Thought: <the thought>")
_THOUGHT = re.compile(r"^thought:[ \t]*(.*)$", re.IGNORECASE | re.DOTALL)


def polish_messages(words: str, *, instruction: str = "", action: str = "") -> list[dict]:
    said = _cap(" ".join(words.split()), MAX_WORDS_CHARS)
    cut = " (cut here: they said more)" if len(said) < len(" ".join(words.split())) else ""
    lines = [f"Task: {instruction or '(not recorded)'}", f"Action taken at this step: {action or '(none)'}",
             f"What the person said: \"{said}\"{cut}"]
    return [{"role": "system", "content": POLISH_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def parse_thought(text: str) -> str:
    """Read a model's answer strictly: ``Thought: <text>`` (an ``Action:`` line after it is dropped). Raises
    PolishFailed saying what was wrong."""
    shown = " ".join(text.split())[:160]
    if not text.strip():
        raise PolishFailed("the model answered nothing")
    match = _THOUGHT.match(text.strip())
    if not match:
        raise PolishFailed(f"the model's answer does not start with 'Thought:': {shown!r}")
    thought = " ".join(re.split(r"(?:^|\n)\s*action:", match.group(1), flags=re.IGNORECASE)[0].split())
    if not thought:
        raise PolishFailed("the model wrote 'Thought:' and nothing after it")
    if len(thought) > MAX_THOUGHT_CHARS:
        raise PolishFailed(f"the model's thought is {len(thought)} characters long; at most {MAX_THOUGHT_CHARS} "
                           f"are kept")
    return thought


class CleanupPolisher:
    name = "cleanup"

    def polish(self, words: str, *, instruction: str = "", action: str = "") -> str:
        thought = cleanup(words)
        if not thought:
            raise PolishFailed(f"only filler words were said ({_cap(words.strip(), 80)!r}): there is no thought "
                               f"to write")
        return thought


class ModelPolisher:
    name = "openai"

    def __init__(self, policy) -> None:
        self.policy = policy

    def polish(self, words: str, *, instruction: str = "", action: str = "") -> str:
        if not cleanup(words):
            raise PolishFailed(f"only filler words were said ({_cap(words.strip(), 80)!r}): there is no thought "
                               f"to write")
        output = self.policy.act(polish_messages(words, instruction=instruction, action=action), temperature=0.0)
        if output.error:
            raise PolishFailed(f"the model could not be asked: {output.error}"[:480])
        return parse_thought(output.text)


def polisher_for(config: dict):
    if config["backend"] == "cleanup":
        return CleanupPolisher()
    timeout = config["timeout_seconds"] or django_settings.LOUPE_OPENAI_TIMEOUT_SECONDS
    retries = django_settings.LOUPE_OPENAI_RETRIES if config["retries"] is None else config["retries"]
    return ModelPolisher(make_policy("openai", base_url=config["base_url"] or django_settings.LOUPE_OPENAI_BASE_URL,
                                     model=config["model"], api_key=django_settings.LOUPE_OPENAI_API_KEY or None,
                                     timeout=timeout, retries=retries, max_tokens=200))


# --- settings --------------------------------------------------------------------------------------------------
def polish_settings_of(project: Project) -> dict:
    return section_of(POLISH_SETTINGS, project)


def _bad(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"'{field}': {message}", errors={field: [message]})


def _clean(changes: dict) -> dict:
    unknown = set(changes) - set(DEFAULT_POLISH)
    if unknown:
        raise ApplicationError(f"Unknown polish setting(s): {', '.join(sorted(unknown))}; the settings are "
                               f"{', '.join(DEFAULT_POLISH)}.", errors={k: ["Unknown setting."] for k in unknown})
    for key, value in changes.items():
        if key == "enabled" and not isinstance(value, bool):
            raise _bad(key, "use true or false.")
        if key == "backend" and value not in BACKENDS:
            raise _bad(key, f"'{value}' is not one of {', '.join(BACKENDS)}.")
        if key in ("model", "base_url") and (not isinstance(value, str) or len(value) > 500 or "\x00" in value):
            raise _bad(key, "use a text of at most 500 characters.")
        if key == "base_url" and value and not value.startswith(("http://", "https://")):
            raise _bad(key, "use an http:// or https:// URL (empty: LOUPE_OPENAI_BASE_URL).")
        if key == "timeout_seconds" and value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not 1 <= value <= 600):
            raise _bad(key, "use a number of seconds from 1 to 600, or null for LOUPE_OPENAI_TIMEOUT_SECONDS.")
        if key == "retries" and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                       or not 0 <= value <= 5):
            raise _bad(key, "use a whole number from 0 to 5, or null for LOUPE_OPENAI_RETRIES.")
    return dict(changes)


def _settings_clean(project: Project, current: dict, changes: dict) -> dict:
    merged = {**current, **_clean(changes)}
    if merged["backend"] == "openai" and not merged["model"]:
        raise _bad("model", "the openai polisher needs the name of the model the server serves.")
    return merged


POLISH_SETTINGS = Section(key="polish", defaults=DEFAULT_POLISH, clean=_settings_clean, audit_action="polish.settings")


def polish_settings_set(*, project: Project, actor, changes: dict) -> dict:
    return section_set(section=POLISH_SETTINGS, project=project, actor=actor, changes=changes)


def _queue(steps: list[Step]) -> None:
    """Mark steps queued and send their polish once the caller's transaction commits."""
    if not steps:
        return
    now = timezone.now()
    ids = [s.pk for s in steps]
    Step.objects.filter(pk__in=ids).update(polish_state=PolishState.QUEUED, polish_error="", polished_at=now)
    for step in steps:
        step.polish_state, step.polish_error, step.polished_at = PolishState.QUEUED, "", now
    transaction.on_commit(lambda: [job("flywheel.tasks.step_polish").delay(pk) for pk in ids])


def polish_after_words(step: Step) -> None:
    """The step's words changed: polish them (unless a person's edit stands, or the project switched polishing
    off). Called inside the transaction that stored the words."""
    if step.polish_state == PolishState.EDITED or not step.human_thought.strip():
        return
    settings = Project.objects.filter(episodes__id=step.episode_id).values_list("settings", flat=True).first() or {}
    if not {**DEFAULT_POLISH, **settings.get("polish", {})}["enabled"]:
        return
    _queue([step])


def _action_text(step: Step) -> str:
    if step.action_text:
        return step.action_text
    if step.action:
        args = ", ".join(f"{k}={v!r}" for k, v in (step.action.get("args") or {}).items())
        return f"{step.action.get('name')}({args})"
    return ""


def step_polish(*, step_id: int) -> str:
    """Polish one step's words now (the task's body); returns what happened. Nothing is raised for a polisher that
    fails: the step says why (state ``failed``). The polisher runs outside any transaction (a model may take its
    timeout); the result is stored only if the words are still those it read and nobody edited meanwhile."""
    step = Step.objects.select_related("episode__project").filter(pk=step_id).first()
    if step is None:
        return "no such step"
    words = step.human_thought.strip()
    if step.polish_state == PolishState.EDITED:
        return "edited: kept"
    if step.polish_state == PolishState.DONE and step.polish_source == words:
        return "done already"
    thought, error = "", ""
    if not words:
        error = "no words were said during this step"
    else:
        try:
            thought = polisher_for(polish_settings_of(step.episode.project)).polish(
                words, instruction=step.instruction, action=_action_text(step))
        except PolishFailed as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a broken polisher is recorded on the step, not lost in a log
            log.exception("polish of step %s crashed", step_id)
            error = f"the polisher crashed: {type(exc).__name__}: {exc}"
    with transaction.atomic():
        locked = Step.objects.select_for_update().filter(pk=step_id).first()
        if locked is None:
            return "no such step"
        if locked.human_thought.strip() != words:
            return "stale: newer words are queued"
        if locked.polish_state == PolishState.EDITED:
            return "edited meanwhile: kept"
        thought, error = thought.replace("\x00", ""), error.replace("\x00", "")  # PostgreSQL text holds no NUL
        Step.objects.filter(pk=step_id).update(
            polished_thought=thought, polish_error=error[:500], polish_source=words, polished_at=timezone.now(),
            polish_state=PolishState.DONE if thought else PolishState.FAILED)
    return "done" if thought else f"failed: {error}"


def may_edit(*, step: Step, user, role: str | None) -> bool:
    """Managers (and admins) of the project, and the annotator the step belongs to: the person who acted on or
    approved it, or who started the episode."""
    if role_at_least(role, "manager"):
        return True
    return role is not None and user.pk in (step.intervened_by_id, step.episode.created_by_id)


def _may_or_refuse(step: Step, user, role: str | None) -> None:
    if not may_edit(step=step, user=user, role=role):
        raise ApplicationError("Only the project's managers and the annotator who worked on this step may change its "
                               "polished thought.", status=403)


def step_of(*, episode: Episode, index: int) -> Step:
    step = Step.objects.select_related("episode").filter(episode=episode, index=index).first()
    if step is None:
        raise ApplicationError(f"Episode {episode.pk} has no step with index {index} (0-based; it has "
                               f"{episode.steps.count()} steps).", status=404)
    return step


@transaction.atomic
def step_polish_request(*, step: Step, user, role: str | None) -> tuple[Step, bool]:
    """Polish a step again (its edit too, when it has one); (step, queued). A second request while the first is
    still queued is the same request."""
    _may_or_refuse(step, user, role)
    locked = Step.objects.select_for_update().select_related("episode").get(pk=step.pk)
    if not locked.human_thought.strip():
        raise ApplicationError(f"Nobody said anything during step {locked.index + 1}, so there is nothing to polish. "
                               f"Words land on steps a person acted on or approved while recording.",
                               errors={"step": ["No words."]})
    recent = timezone.now() - timedelta(seconds=REQUEUE_AFTER_SECONDS)
    if locked.polish_state == PolishState.QUEUED and locked.polished_at and locked.polished_at > recent:
        return locked, False
    _queue([locked])
    audit_record(actor=user, action="step.polish_request", target=locked.episode, data={"step": locked.index})
    return locked, True


@transaction.atomic
def step_polish_edit(*, step: Step, user, role: str | None, text) -> Step:
    """A person writes the polished thought themselves (state ``edited``; audited). Empty text means "no polished
    thought": rows use the step's own thought."""
    _may_or_refuse(step, user, role)
    if not isinstance(text, str):
        raise _bad("polished_thought", "send the thought as text.")
    text = " ".join(text.split())
    if len(text) > MAX_THOUGHT_CHARS:
        raise _bad("polished_thought", f"at most {MAX_THOUGHT_CHARS} characters; this is {len(text)}.")
    locked = Step.objects.select_for_update().select_related("episode").get(pk=step.pk)
    if not locked.human_thought.strip():
        raise ApplicationError(f"Nobody said anything during step {locked.index + 1}; a polished thought is made "
                               f"from spoken words, so there is none to edit.", errors={"step": ["No words."]})
    before = locked.polished_thought
    text = privacy.text_redact(settings=locked.episode.project.settings, text=text)  # stored redacted (issue 40)
    Step.objects.filter(pk=locked.pk).update(polished_thought=text, polish_state=PolishState.EDITED, polish_error="",
                                             polish_source=locked.human_thought.strip(), polished_at=timezone.now())
    audit_record(actor=user, action="step.polish_edit", target=locked.episode,
                 data={"step": locked.index, "before": before[:300], "after": text[:300]})
    locked.refresh_from_db()
    return locked


@transaction.atomic
def episode_polish_request(*, episode: Episode, actor) -> list[int]:
    """Polish again every step of the episode with words, except those a person edited; the indices queued."""
    with_words = [s for s in episode.steps.select_for_update().order_by("index") if s.human_thought.strip()]
    if not with_words:
        raise ApplicationError(f"Nobody said anything during episode {episode.pk}'s steps, so there is nothing to "
                               f"polish. Words land on steps a person acted on or approved while recording.",
                               errors={"episode": ["No words."]})
    todo = [s for s in with_words if s.polish_state != PolishState.EDITED]
    if not todo:
        raise ApplicationError("Every step with words has a polished thought a person edited; polish a step again "
                               "on its own to replace an edit.", status=409)
    _queue(todo)
    audit_record(actor=actor, action="episode.polish_request", target=episode, data={"steps": len(todo)})
    return [s.index for s in todo]


def step_polish_payload(step: Step, *, can_edit: bool) -> dict:
    words = step.human_thought.strip()
    return {"index": step.index, "words": step.human_thought, "polished_thought": step.polished_thought,
            "polish_state": step.polish_state, "polish_error": step.polish_error,
            "polished_at": step.polished_at.isoformat() if step.polished_at else None,
            "stale": bool(words) and step.polish_state in (PolishState.DONE, PolishState.EDITED)
            and step.polish_source != words,
            "can_edit": can_edit}


def episode_polish_progress(episode: Episode) -> dict:
    """How far the episode's words are polished: steps with words, and how many are done, edited, queued, failed or
    not polished yet (words from before polishing was switched on)."""
    counts = dict(episode.steps.exclude(human_thought="").values_list("polish_state").annotate(n=Count("pk")))
    return {"steps_with_words": sum(counts.values()), "done": counts.get(PolishState.DONE, 0),
            "edited": counts.get(PolishState.EDITED, 0), "queued": counts.get(PolishState.QUEUED, 0),
            "failed": counts.get(PolishState.FAILED, 0), "not_polished": counts.get(PolishState.NONE, 0)}


def episode_polish(*, episode: Episode, user, role: str | None) -> dict:
    """``GET episodes/<id>/polish``: the progress and each step's words and polished thought."""
    steps = episode.steps.select_related("episode").exclude(human_thought="", polish_state="").order_by("index")
    return {"episode": episode.pk, "progress": episode_polish_progress(episode),
            "can_request": role_at_least(role, "manager"),
            "settings": {"backend": polish_settings_of(episode.project)["backend"],
                         "enabled": polish_settings_of(episode.project)["enabled"]},
            "steps": [step_polish_payload(s, can_edit=may_edit(step=s, user=user, role=role)) for s in steps]}


@transaction.atomic
def step_human_thought_set(*, step: Step, text: str) -> Step:
    """Store the words said during a step, raw, and queue their polish into a thought (annotation/polish.py)."""
    step.human_thought = text
    step.save(update_fields=["human_thought"])
    polish_after_words(step)
    return step
