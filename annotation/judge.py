"""The judge: a verdict on finished episodes where no person reviewed them and no rule checks the task (issue 21),
stored as :class:`~rollouts.models.Judgement` records that routing's ``judge`` validators read.

Settings per project (``Project.settings["judge"]``, ``GET/PATCH /api/v1/projects/<id>/judge``):
  ``enabled``: judge every episode that finishes (a ``default``-queue job); managers may also judge on demand.
  ``backend``: ``rule`` (the CPU default, no model), ``openai`` (a VLM on an OpenAI-compatible server: vLLM) or
  ``scripted`` (given ``answers``, for demos and tests of voting).
  ``samples`` (k) and ``temperature``: the openai/scripted judge is asked k times and the majority wins; its share
  of the k is the confidence. ``screenshots``: how many of the last screenshots it sees. ``model``, ``base_url``,
  ``timeout_seconds``, ``retries``: the openai server (defaults: ``LOUPE_OPENAI_*``).

The ``rule`` judge: the environment's reward when its task has a checker (success at the routing threshold,
confidence 1); otherwise the outcome the person who finished the episode chose (confidence 1); otherwise a weak
heuristic, confidence 0.5: success when the agent's last turn is ``finished(...)``, failure when it never said
it had finished (it ran out of steps or stopped).

Calibration compares the judge's newest verdict with the reviewers' conclusion on the episode (accepted or
rejected; disputed episodes and no-verdicts are left out): agreement, Cohen's kappa and the 2x2 confusion table,
overall and per task, so a manager sees whether the judge can be trusted before routing by it.
"""
from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict

from django.conf import settings as django_settings
from django.core.files.storage import default_storage
from django.db import transaction

from agent.judge import FAILURE, NO_VERDICT, SUCCESS, EpisodeForJudge, ScriptedJudgePolicy, Vote, judge_votes
from agent.judge import Judgement as Verdict
from agent.policies import make_policy
from core.audit import audit_record
from core.errors import ApplicationError
from core.jobs import job
from core.stats import cohen_kappa
from projects.models import Project
from projects.project_settings import Section, section_of, section_set
from rollouts.models import Episode, EpisodeStatus, Judgement, ReviewStatus, Step
from rollouts.routing import routing_of

log = logging.getLogger(__name__)

BACKENDS = ("rule", "openai", "scripted")
DEFAULT_JUDGE = {"enabled": False, "backend": "rule", "samples": 1, "temperature": 0.7, "screenshots": 3,
                 "model": "", "base_url": "", "timeout_seconds": None, "retries": None, "answers": []}
MAX_SAMPLES, MAX_SCREENSHOTS, MAX_BATCH = 15, 10, 2000
HEURISTIC_CONFIDENCE = 0.5


# --- settings ----------------------------------------------------------------------------------------------
def judge_settings_of(project: Project) -> dict:
    return section_of(JUDGE_SETTINGS, project)


def _bad(field: str, message: str) -> ApplicationError:
    return ApplicationError(f"'{field}': {message}", errors={field: [message]})


def _whole(value, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(field, f"use a whole number from {low} to {high}.")
    return value


def _clean(changes: dict) -> dict:
    unknown = set(changes) - set(DEFAULT_JUDGE)
    if unknown:
        raise ApplicationError(f"Unknown judge setting(s): {', '.join(sorted(unknown))}; the settings are "
                               f"{', '.join(DEFAULT_JUDGE)}.", errors={k: ["Unknown setting."] for k in unknown})
    out = {}
    for key, value in changes.items():
        if key == "enabled":
            if not isinstance(value, bool):
                raise _bad(key, "use true or false.")
        elif key == "backend":
            if value not in BACKENDS:
                raise _bad(key, f"'{value}' is not one of {', '.join(BACKENDS)}.")
        elif key == "samples":
            value = _whole(value, key, 1, MAX_SAMPLES)
        elif key == "screenshots":
            value = _whole(value, key, 0, MAX_SCREENSHOTS)
        elif key == "retries":
            value = None if value is None else _whole(value, key, 0, 5)
        elif key in ("temperature", "timeout_seconds"):
            low, high = (0, 2) if key == "temperature" else (1, 600)
            if value is None and key == "timeout_seconds":
                pass
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                raise _bad(key, f"use a number from {low} to {high}.")
            else:
                value = float(value)
        elif key in ("model", "base_url"):
            if not isinstance(value, str) or len(value) > 500:
                raise _bad(key, "use a text of at most 500 characters.")
            if key == "base_url" and value and not value.startswith(("http://", "https://")):
                raise _bad(key, "use an http:// or https:// URL (empty: LOUPE_OPENAI_BASE_URL).")
        elif key == "answers":
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value) or len(value) > MAX_SAMPLES:
                raise _bad(key, f"use a list of at most {MAX_SAMPLES} answers (texts).")
        out[key] = value
    return out


def _settings_clean(project: Project, current: dict, changes: dict) -> dict:
    """The judge settings with ``changes`` applied; the result must be a judge that can run (openai names its
    model, scripted has answers)."""
    merged = {**current, **_clean(changes)}
    if merged["backend"] == "openai" and not merged["model"]:
        raise _bad("model", "the openai judge needs the name of the model the server serves.")
    if merged["backend"] == "scripted" and not merged["answers"]:
        raise _bad("answers", "the scripted judge needs its answers (e.g. 'Verdict: success\\nReason: ...').")
    return merged


JUDGE_SETTINGS = Section(key="judge", defaults=DEFAULT_JUDGE, clean=_settings_clean, audit_action="judge.settings")


def judge_settings_set(*, project: Project, actor, changes: dict) -> dict:
    return section_set(section=JUDGE_SETTINGS, project=project, actor=actor, changes=changes)


# --- judging -----------------------------------------------------------------------------------------------
def _final_answer(steps: list[Step]) -> str:
    for step in reversed(steps):
        if step.action:
            if step.action.get("name") == "finished":
                return str((step.action.get("args") or {}).get("answer", "")) or "(finished without an answer)"
            return ""
    return ""


def _action_text(step: Step) -> str:
    if not step.action:
        return f"(no action: {step.void_reason or 'the turn did not parse'})"
    if step.action_text:
        return step.action_text
    args = ", ".join(f"{k}={v!r}" for k, v in (step.action.get("args") or {}).items())
    return f"{step.action.get('name')}({args})"


def episode_for_judge(episode: Episode, steps: list[Step], screenshots: int) -> EpisodeForJudge:
    """What the judge sees: the stored steps in order, the last ``screenshots`` stored screenshots read back."""
    shots = []
    for step in [s for s in steps if s.screenshot][-screenshots:] if screenshots else []:
        with default_storage.open(step.screenshot, "rb") as handle:
            shots.append((step.index, handle.read()))
    instruction = next((s.instruction for s in steps if s.instruction), "") or episode.task.instruction_template
    return EpisodeForJudge(instruction=instruction, actions=[_action_text(s) for s in steps],
                           thoughts=[s.thought for s in steps], final_answer=_final_answer(steps), screenshots=shots)


def rule_verdict(episode: Episode, steps: list[Step], threshold: float) -> Verdict:
    """The ``rule`` judge (see the module's docstring)."""
    if episode.env_reward is not None:
        ok = episode.env_reward >= threshold
        reason = (f"the task's checker paid {episode.env_reward:g} (success needs {threshold:g})")
        return Verdict(SUCCESS if ok else FAILURE, reason, 1.0, [Vote(SUCCESS if ok else FAILURE, reason)], "rule")
    if episode.outcome in (SUCCESS, FAILURE):
        reason = f"no checker; the person who finished it marked it a {episode.outcome}"
        return Verdict(episode.outcome, reason, 1.0, [Vote(episode.outcome, reason)], "rule")
    answer = _final_answer(steps)
    if answer:
        reason = f"no checker; the agent's last turn says it finished ({answer[:120]}), a weak sign"
        verdict = SUCCESS
    else:
        reason = "no checker; the agent never said it had finished (it ran out of steps or stopped)"
        verdict = FAILURE
    return Verdict(verdict, reason, HEURISTIC_CONFIDENCE, [Vote(verdict, reason)], "rule")


def _policy(config: dict):
    if config["backend"] == "scripted":
        return ScriptedJudgePolicy(config["answers"])
    timeout = config["timeout_seconds"] or django_settings.LOUPE_OPENAI_TIMEOUT_SECONDS
    retries = django_settings.LOUPE_OPENAI_RETRIES if config["retries"] is None else config["retries"]
    return make_policy("openai", base_url=config["base_url"] or django_settings.LOUPE_OPENAI_BASE_URL,
                       model=config["model"], api_key=django_settings.LOUPE_OPENAI_API_KEY or None,
                       timeout=timeout, retries=retries, max_tokens=200)


def _verdict(episode: Episode, config: dict) -> Verdict:
    steps = list(episode.steps.order_by("index"))
    if config["backend"] == "rule":
        return rule_verdict(episode, steps, routing_of(episode.project)["reward_threshold"])
    try:
        seen = episode_for_judge(episode, steps, config["screenshots"])
    except OSError as exc:
        return Verdict(NO_VERDICT, f"a screenshot of the episode could not be read: {exc}", None, [], "")
    return judge_votes(_policy(config), seen, samples=config["samples"], temperature=config["temperature"])


def judge_episode(*, episode_id: int, actor=None, config: dict | None = None) -> Judgement:
    """Judge one finished episode with the project's judge settings (or ``config``) and store the verdict as its
    newest judgement. The judge runs outside any transaction (an openai judge may take k timeouts); a judge that
    answers garbage or times out is stored as no verdict with the reason, never raised."""
    episode = Episode.objects.select_related("project", "task").filter(pk=episode_id).first()
    if episode is None:
        raise ApplicationError(f"Episode {episode_id} does not exist.", status=404)
    if episode.status != EpisodeStatus.FINISHED:
        raise ApplicationError(f"Episode {episode.pk} is {episode.status}; only finished episodes are judged.",
                               status=409)
    config = {**judge_settings_of(episode.project), **_clean(config or {})}
    try:
        verdict = _verdict(episode, config)
    except Exception as exc:  # noqa: BLE001 - a broken judge is recorded on the episode, not lost in a log
        log.exception("judge of episode %s crashed", episode.pk)
        verdict = Verdict(NO_VERDICT, f"the judge crashed: {type(exc).__name__}: {exc}", None, [], "")
    with transaction.atomic():
        Episode.objects.select_for_update().filter(pk=episode.pk).first()  # one newest judgement at a time
        Judgement.objects.filter(episode_id=episode.pk, latest=True).update(latest=False)
        judgement = Judgement.objects.create(
            episode_id=episode.pk, verdict=verdict.verdict, reason=verdict.reason[:5000],
            confidence=verdict.confidence, votes=[v.to_dict() for v in verdict.votes], judge=config["backend"],
            model=verdict.model[:200], latest=True, created_by=actor,
            config={k: config[k] for k in ("backend", "samples", "temperature", "screenshots", "model")})
    return judgement


def judge_after_finish(episode: Episode) -> None:
    """Called when an episode finishes: queue its judgement once the finish commits, if the project asks."""
    if episode.status != EpisodeStatus.FINISHED or not judge_settings_of(episode.project).get("enabled"):
        return
    episode_id = episode.pk
    transaction.on_commit(lambda: job("flywheel.tasks.episode_judge").delay(episode_id))


def on_episode_finished(sender, *, episode: Episode, **_) -> None:
    judge_after_finish(episode)


def judge_request(*, project: Project, actor, episode_ids: list[int]) -> list[int]:
    """A manager asks for judgements: queue the finished ones among ``episode_ids`` (of this project) on the
    ``default`` queue; refuses when none can be judged."""
    if len(episode_ids) > MAX_BATCH:
        raise ApplicationError(f"{len(episode_ids)} episodes at once is too many; judge at most {MAX_BATCH} a request "
                               f"(narrow the filter).", errors={"episodes": ["Too many."]})
    found = set(Episode.objects.filter(project=project, pk__in=episode_ids, status=EpisodeStatus.FINISHED)
                .values_list("pk", flat=True))
    queued = [pk for pk in dict.fromkeys(episode_ids) if pk in found]
    if not queued:
        raise ApplicationError("None of these episodes is a finished episode of this project; only finished "
                               "episodes are judged.", status=404 if episode_ids else 400,
                               errors={"episodes": ["Nothing to judge."]})
    user_id = getattr(actor, "pk", None)
    transaction.on_commit(lambda: [job("flywheel.tasks.episode_judge").delay(pk, user_id) for pk in queued])
    audit_record(actor=actor, action="judge.request", target=project, data={"episodes": len(queued)})
    return queued


def judgement_payload(judgement: Judgement) -> dict:
    return {"id": judgement.pk, "episode": judgement.episode_id, "verdict": judgement.verdict,
            "reason": judgement.reason, "confidence": judgement.confidence, "votes": judgement.votes,
            "judge": judgement.judge, "model": judgement.model, "config": judgement.config,
            "latest": judgement.latest,
            "created_by": {"id": judgement.created_by_id, "username": judgement.created_by.username}
            if judgement.created_by_id else None,
            "created_at": judgement.created_at.isoformat()}


# --- calibration against reviewers ------------------------------------------------------------------------
def _agreement(pairs: list[tuple[str, str]]) -> dict:
    """pairs: (judge verdict, reviewers' verdict) as success/failure."""
    confusion = Counter(pairs)
    kappa = cohen_kappa(pairs)
    return {"episodes": len(pairs),
            "agreement": round(sum(a == b for a, b in pairs) / len(pairs), 4) if pairs else None,
            "kappa": round(kappa, 4) if kappa is not None else None,
            "confusion": {"judge_success_review_accept": confusion[(SUCCESS, SUCCESS)],
                          "judge_success_review_reject": confusion[(SUCCESS, FAILURE)],
                          "judge_failure_review_accept": confusion[(FAILURE, SUCCESS)],
                          "judge_failure_review_reject": confusion[(FAILURE, FAILURE)]}}


def calibration(*, project: Project) -> dict:
    """How far the judge's newest verdicts agree with the reviewers' (accepted / rejected episodes), overall and
    per task, with how many judged episodes could not be compared (no verdict, or no settled review)."""
    rows = Judgement.objects.filter(episode__project=project, latest=True).values_list(
        "verdict", "episode__review_status", "episode__task__task_name")
    review_as = {ReviewStatus.ACCEPTED: SUCCESS, ReviewStatus.REJECTED: FAILURE}
    pairs, by_task = [], defaultdict(list)
    judged = no_verdict = unreviewed = 0
    for verdict, review_status, task in rows.iterator(chunk_size=5000):
        judged += 1
        if verdict == NO_VERDICT:
            no_verdict += 1
            continue
        if review_status not in review_as:
            unreviewed += 1
            continue
        pair = (verdict, review_as[review_status])
        pairs.append(pair)
        by_task[task].append(pair)
    return {"judged": judged, "no_verdict": no_verdict, "not_reviewed": unreviewed, **_agreement(pairs),
            "tasks": [{"task": task, **_agreement(task_pairs)} for task, task_pairs in sorted(by_task.items())]}
