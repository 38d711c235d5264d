"""Routing: UI-TARS-2's validator V(episode) per project (``Project.settings["routing"]``), which sends V=1 episodes
to SFT and V=0 to CT (snapshots/snapshot_kinds.py).

Rules: ``reward``: env reward >= threshold; ``review``: the reviews accept it; ``both``: both;
``judge``: the judge's newest verdict (annotation/judge.py) is success (V=0: failure; no verdict waits);
``reward_or_judge``: the reward clears the threshold or the judge says success (V=0: the reward is below it or
absent and the judge says failure; otherwise it waits for the judge);
``judge_and_review``: the judge says success and the reviews accept it (V=0: either says no).
"""
from __future__ import annotations

import math

from django.db.models import Exists, OuterRef, Q

from core.errors import ApplicationError
from projects.models import Project
from projects.project_settings import Section, section_of, section_set
from rollouts.models import Judgement, JudgeVerdict, Outcome, ReviewStatus

# MiniWoB++ pays 1 - (time used / time limit) for a success, so a solved task earns 0.9..1.0 and never
# exactly 1; a failure pays 0 or less. 0.5 splits them.
DEFAULT_ROUTING = {"rule": "reward", "reward_threshold": 0.5}


# rule -> (V=1, V=0), each made of the (V=1, V=0) conditions of the reward, the reviews and the judge
_RULE_Q = {
    "reward": lambda reward, review, judge: reward,
    "review": lambda reward, review, judge: review,
    "both": lambda reward, review, judge: (reward[0] & review[0], reward[1] | review[1]),
    "judge": lambda reward, review, judge: judge,
    "reward_or_judge": lambda reward, review, judge: (reward[0] | judge[0], reward[1] & judge[1]),
    "judge_and_review": lambda reward, review, judge: (judge[0] & review[0], judge[1] | review[1]),
}
RULES = tuple(_RULE_Q)


def _read(stored: dict, project: Project) -> dict:
    return {"rule": stored["rule"], "reward_threshold": float(stored["reward_threshold"])}


def _clean(project: Project, routing: dict, changes: dict) -> dict:
    rule, reward_threshold = changes.get("rule"), changes.get("reward_threshold")
    if rule is not None:
        if rule not in RULES:
            raise ApplicationError(f"Unknown rule '{rule}'; use {', '.join(RULES)}.",
                                   errors={"rule": ["Invalid choice."]})
        routing["rule"] = rule
    if reward_threshold is not None:
        if isinstance(reward_threshold, bool) or not isinstance(reward_threshold, (int, float)) or \
                not math.isfinite(reward_threshold) or not 0 <= reward_threshold <= 1:
            raise ApplicationError(
                "The reward threshold is a share of the full reward, from 0 to 1 (MiniWoB++ pays 0.9-1.0 for a "
                "success and 0 or less for a failure: 0.5 splits them).",
                errors={"reward_threshold": ["Use a number from 0 to 1."]})
        routing["reward_threshold"] = float(reward_threshold)
    return routing


ROUTING_SETTINGS = Section(key="routing", defaults=DEFAULT_ROUTING, clean=_clean, read=_read,
                           audit_action="routing.set", audit=lambda changes, stored: stored)


def routing_of(project: Project) -> dict:
    return section_of(ROUTING_SETTINGS, project)


def routing_set(*, project: Project, actor, rule: str | None = None, reward_threshold: float | None = None) -> dict:
    """Change the project's rule or threshold (None: as it is); ``project`` sees the new routing too."""
    changes = {key: value for key, value in (("rule", rule), ("reward_threshold", reward_threshold))
               if value is not None}
    return section_set(section=ROUTING_SETTINGS, project=project, actor=actor, changes=changes)


def _judged(verdict: str) -> Q:
    """The episode's newest judgement says ``verdict``."""
    return Q(Exists(Judgement.objects.filter(episode=OuterRef("pk"), latest=True, verdict=verdict)))


def valid_q(routing: dict) -> tuple[Q, Q]:
    """(V=1, V=0) as conditions on finished episodes. Episodes that are neither wait for a review or a judge.

    By reward: the task's own check; where no check scored the episode (a task the judge or a person decides), a
    person's finish with success counts as done. Where a person's outcome and the check disagree (review_reason),
    neither decides: the episode waits for a review, and its verdict routes it."""
    accepted, rejected = Q(review_status=ReviewStatus.ACCEPTED), Q(review_status=ReviewStatus.REJECTED)
    agreed = Q(review_reason="")
    unscored_success = Q(env_reward__isnull=True, outcome=Outcome.SUCCESS)
    reward_ok = (agreed & (Q(env_reward__gte=routing["reward_threshold"]) | unscored_success)) | (~agreed & accepted)
    reward_bad = (agreed & (Q(env_reward__lt=routing["reward_threshold"])
                            | (Q(env_reward__isnull=True) & ~Q(outcome=Outcome.SUCCESS)))) | (~agreed & rejected)
    judge = _judged(JudgeVerdict.SUCCESS), _judged(JudgeVerdict.FAILURE)
    return _RULE_Q.get(routing["rule"], _RULE_Q["both"])((reward_ok, reward_bad), (accepted, rejected), judge)
