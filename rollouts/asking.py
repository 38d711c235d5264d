"""The policy asks a person when it is unsure: the project's confidence floor (``ask_below``, a settings section,
off by default), an autonomous episode's ask (it pauses before executing a proposal under the floor and waits in
the person queue with its reason) and its end, the queue itself (longest wait first), and the calibration card
(how often steps at each confidence were good, what share of steps each floor would have asked about).

A proposal's confidence is agent/confidence.py's score of its action tokens (Step.confidence). The rollout
worker's supervisor (annotation/supervision.py) decides when to ask; this module keeps the state it asks in."""
from __future__ import annotations

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from core.errors import ApplicationError
from projects.models import Project
from projects.project_settings import Section, section_of
from rollouts.episodes import _episode_state_event
from rollouts.models import Actor, Episode, EpisodeStatus, Mode, Rejection, Step

FLOORS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # the calibration card's floors
BUCKETS = 10  # confidence buckets of 0.1
RECENT_STEPS = 2000  # the calibration card reads this many recent steps with a confidence
GOOD_ENOUGH = 0.9  # the suggested floor lets through steps that were good at least this often


def _clean(project: Project, current: dict, changes: dict) -> dict:
    unknown = sorted(set(changes) - {"ask_below"})
    if unknown:
        raise ApplicationError(f"Unknown setting {', '.join(unknown)}; this section has ask_below.",
                               errors={unknown[0]: ["Unknown setting."]})
    floor = changes.get("ask_below", current.get("ask_below"))
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 < floor < 1):
        raise ApplicationError("'ask_below' is a confidence between 0 and 1 (for example 0.5), or null to never ask.",
                               errors={"ask_below": ["A number between 0 and 1, or null."]})
    return {"ask_below": None if floor is None else float(floor)}


ASK_SECTION = Section(key="asking", defaults={"ask_below": None}, clean=_clean, audit_action="settings.asking")


def ask_floor(project: Project | int) -> float | None:
    """The project's confidence floor; None when its episodes never ask."""
    if not isinstance(project, Project):
        project = Project.objects.only("settings").get(pk=project)
    return section_of(ASK_SECTION, project)["ask_below"]


def ask_reason(confidence: float, floor: float) -> str:
    """Why the model asks, as the queue and the session page show it: "confidence 0.31 < 0.5"."""
    return f"confidence {confidence:.2f} < {floor:g}"


def should_ask(*, mode: str, confidence: float | None, floor: float | None) -> bool:
    """Whether an episode in ``mode`` asks a person about a proposal of ``confidence`` (None: no logprobs, so
    nothing to go by; a supervised episode has its person already)."""
    return mode == Mode.AUTONOMOUS and floor is not None and confidence is not None and confidence < floor


def _announce(episode_id: int) -> Episode:
    episode = Episode.objects.select_related("task", "checkpoint", "created_by", "controller").get(pk=episode_id)
    _episode_state_event(episode, fresh=True)
    return episode


@transaction.atomic
def episode_ask_open(*, episode_id: int, reason: str) -> Episode:
    """The episode pauses before executing its proposal and waits in the person queue with ``reason``; asking
    again (the supervisor reads the episode each tick) keeps the time it began to wait."""
    Episode.objects.filter(pk=episode_id, asked_at__isnull=True).update(asked_at=timezone.now())
    Episode.objects.filter(pk=episode_id).update(ask_reason=reason[:200], status=EpisodeStatus.PAUSED)
    return _announce(episode_id)


@transaction.atomic
def episode_ask_close(*, episode_id: int) -> Episode | None:
    """A person decided the step it asked about: it leaves the queue and, unless a person paused it, runs on."""
    episode = Episode.objects.select_for_update().filter(pk=episode_id, asked_at__isnull=False).first()
    if episode is None:
        return None
    fields = {"ask_reason": "", "asked_at": None}
    if episode.status == EpisodeStatus.PAUSED:
        fields["status"] = EpisodeStatus.RUNNING
    Episode.objects.filter(pk=episode_id).update(**fields)
    return _announce(episode_id)


def asks_waiting(*, project: Project) -> list[dict]:
    """The person queue: the project's autonomous episodes paused on an ask, longest wait first."""
    now = timezone.now()
    waiting = (Episode.objects.filter(project=project, asked_at__isnull=False, status=EpisodeStatus.PAUSED)
               .select_related("task", "controller").order_by("asked_at", "id"))
    return [{"episode": e.pk, "task": e.task.task_name, "seed": e.seed, "reason": e.ask_reason,
             "step": e.pending_index, "asked_at": e.asked_at.isoformat(),
             "waited_seconds": round((now - e.asked_at).total_seconds(), 1),
             "control": e.controller.username if e.controller_id else None} for e in waiting]


def _good(step_actor: str, rejected: bool) -> bool:
    return step_actor == Actor.MODEL and not rejected


def calibration(*, project: Project) -> dict:
    """For recent steps a person decided (a supervised episode's, or one asked about) and rejected proposals, how
    often a proposal in each confidence bucket was good (approved as it was: not edited, taken over or rejected);
    for each floor, the share of recent proposals under it (the share of steps it would have asked about); and a
    suggested floor: the lowest at which the proposals at or above it were good at least 90 % of the time."""
    decided = Q(episode__mode=Mode.SUPERVISED) | Q(info__has_key="asked")
    rejected = Exists(Rejection.objects.filter(step=OuterRef("pk")))
    points = [(c, _good(actor, was_rejected)) for c, actor, was_rejected in
              Step.objects.filter(decided, episode__project=project, confidence__isnull=False)
              .annotate(was_rejected=rejected).order_by("-id")
              .values_list("confidence", "actor", "was_rejected")[:RECENT_STEPS]]
    points += [(c, False) for c in Rejection.objects.filter(episode__project=project, confidence__isnull=False)
               .order_by("-id").values_list("confidence", flat=True)[:RECENT_STEPS]]
    all_confidences = list(Step.objects.filter(episode__project=project, confidence__isnull=False)
                           .order_by("-id").values_list("confidence", flat=True)[:RECENT_STEPS])
    buckets = []
    for b in range(BUCKETS):
        low, high = b / BUCKETS, (b + 1) / BUCKETS
        inside = [good for c, good in points if low <= c < high or (b == BUCKETS - 1 and c >= high)]
        buckets.append({"low": low, "high": high, "steps": len(inside),
                        "good": round(sum(inside) / len(inside), 4) if inside else None})
    floors = []
    suggested = None
    for floor in FLOORS:
        above = [good for c, good in points if c >= floor]
        asked = sum(c < floor for c in all_confidences)
        good_above = round(sum(above) / len(above), 4) if above else None
        floors.append({"floor": floor, "asked": round(asked / len(all_confidences), 4) if all_confidences else None,
                       "good_above": good_above})
        if suggested is None and good_above is not None and good_above >= GOOD_ENOUGH:
            suggested = floor
    return {"reviewed": len(points), "steps": len(all_confidences), "buckets": buckets, "floors": floors,
            "suggested": suggested, "good_enough": GOOD_ENOUGH, "ask_below": ask_floor(project)}

