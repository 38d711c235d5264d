"""Routing (UI-TARS-2's validator V), buckets, filters and dataset rows (snapshots.py freezes them).

V(episode) per project (``Project.settings["routing"]``):
  rule ``reward``: env reward >= threshold; ``review``: the reviews accept it; ``both``: both;
  ``judge``: the judge's newest verdict (flywheel/judge.py) is success (V=0: failure; no verdict waits);
  ``reward_or_judge``: the reward clears the threshold or the judge says success (V=0: the reward is below it or
  absent and the judge says failure; otherwise it waits for the judge);
  ``judge_and_review``: the judge says success and the reviews accept it (V=0: either says no).
Buckets: V=1 episodes -> ``sft`` (autonomous successes are tagged ``rft``), V=0 -> ``ct``; every
corrected step -> a ``dpo`` pair (a person's turn over the model's proposal, only where it changed the
action, or only the thought and marked so), and every rejected proposal of a step that then did
something else -> a ``dpo`` pair too, and so is a branch's first own step whose action differs from its parent's
step on the identical state, the better episode's step chosen (:func:`branch_pair`); finished autonomous model
episodes with a reward -> ``rl`` (a row an episode for a text target, a GRPO row a step for one that reads
screenshots); finished episodes whose reviews labelled steps -> ``prm`` (a row a labelled step, up to the first bad
one: :func:`prm_step_labels`).
Rows are agent.rows records, rendered from the steps' structure by the one prompt renderer (agent/prompt.py) for
the project's deployed checkpoint (:func:`export_target`): its prompt style and action format, its screenshots
when it reads them; a person's edits, takeovers and the proposals they turned down are written in its format.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.base import ModelState

from agent.actions import Action, Turn
from agent.envs.base import Element
from agent.prompt import DEFAULT_STYLE
from agent.rollout import rejection_feedback
from agent.rows import (DPORow, GRPORow, PRMRow, RenderedFor, RLRow, RLStepRow, SFTRow, StepView, prompt_text,
                        render_prompt, render_turn)
from agent.screen_match import elements_difference
from flywheel.models import (Actor, Correction, Deployment, Episode, EpisodeStatus, Judgement, JudgeVerdict, Mode,
                             Outcome, PolishState, Project, Rejection, ReviewStatus, SnapshotEpisode, SnapshotKind,
                             SnapshotStatus, Split, Step)
from core.audit import audit_record
from core.errors import ApplicationError

RULES = ("reward", "review", "both", "judge", "reward_or_judge", "judge_and_review")
# MiniWoB++ pays 1 - (time used / time limit) for a success, so a solved task earns 0.9..1.0 and never
# exactly 1; a failure pays 0 or less. 0.5 splits them.
DEFAULT_ROUTING = {"rule": "reward", "reward_threshold": 0.5}
FILTER_KEYS = {"tasks", "split", "checkpoint", "mode", "created_after", "created_before", "only_new"}


# --- routing -------------------------------------------------------------------------------------
def routing_of(project: Project) -> dict:
    routing = {**DEFAULT_ROUTING, **(project.settings or {}).get("routing", {})}
    return {"rule": routing["rule"], "reward_threshold": float(routing["reward_threshold"])}


@transaction.atomic
def routing_set(*, project: Project, actor, rule: str | None = None, reward_threshold: float | None = None) -> dict:
    locked = Project.objects.select_for_update().get(pk=project.pk)
    routing = routing_of(locked)
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
    locked.settings = {**(locked.settings or {}), "routing": routing}
    locked.save(update_fields=["settings"])
    project.settings = locked.settings  # the caller's instance sees the new rule too
    audit_record(actor=actor, action="routing.set", target=project, data=routing)
    return routing


def _judged(verdict: str) -> Q:
    """The episode's newest judgement says ``verdict``."""
    return Q(Exists(Judgement.objects.filter(episode=OuterRef("pk"), latest=True, verdict=verdict)))


def _valid_q(routing: dict) -> tuple[Q, Q]:
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
    judge_ok, judge_bad = _judged(JudgeVerdict.SUCCESS), _judged(JudgeVerdict.FAILURE)
    rule = routing["rule"]
    if rule == "reward":
        return reward_ok, reward_bad
    if rule == "review":
        return accepted, rejected
    if rule == "judge":
        return judge_ok, judge_bad
    if rule == "reward_or_judge":
        return reward_ok | judge_ok, reward_bad & judge_bad
    if rule == "judge_and_review":
        return judge_ok & accepted, judge_bad | rejected
    return reward_ok & accepted, reward_bad | rejected


def bucket_episodes(project: Project, kind: str, routing: dict | None = None) -> QuerySet[Episode]:
    """The episodes whose rows belong to bucket ``kind``."""
    routing = routing or routing_of(project)
    finished = Episode.objects.filter(project=project, status=EpisodeStatus.FINISHED)
    valid, invalid = _valid_q(routing)
    if kind == SnapshotKind.SFT:
        return finished.filter(valid)
    if kind == SnapshotKind.CT:
        return finished.filter(invalid)
    if kind == SnapshotKind.DPO:
        return finished.filter(Exists(_dpo_steps().filter(episode=OuterRef("pk")))
                               | Exists(_dpo_rejections().filter(episode=OuterRef("pk")))
                               | Q(pk__in=list(branch_pairs(finished, routing))))
    if kind == SnapshotKind.RL:
        return finished.filter(mode=Mode.AUTONOMOUS, env_reward__isnull=False, n_interventions=0)
    if kind == SnapshotKind.PRM:
        return finished.filter(review_summary__has_key="step_labels")
    raise ApplicationError(f"Unknown kind '{kind}'; use {', '.join(SnapshotKind.values)}.",
                           errors={"kind": ["Invalid choice."]})


def _own_steps(steps: QuerySet[Step]) -> QuerySet[Step]:
    """``steps`` without a branch's copies of its parent's steps (``info.replayed_from``): they are the parent's
    rows already, and would be trained on twice."""
    return steps.exclude(info__has_key="replayed_from")


def _dpo_steps() -> QuerySet[Step]:
    """Steps where a person's turn replaced the model's and changed something: the action, or (an edit) the
    thought. A takeover that did what the model proposed teaches nothing. A branch's copies of its parent's steps
    are left out (:func:`_own_steps`)."""
    return _own_steps(Step.objects).filter(proposal__isnull=False, action__isnull=False,
                                           actor__in=[Actor.EDITED, Actor.HUMAN],
                                           correction__in=[Correction.ACTION, Correction.THOUGHT])


def _dpo_rejections() -> QuerySet[Rejection]:
    """Rejected proposals whose step then ran another action: the executed turn is preferred over them."""
    return Rejection.objects.filter(step__isnull=False, step__action__isnull=False).exclude(action=F("step__action"))


def bucket_steps(kind: str, episodes: QuerySet[Episode]) -> QuerySet[Step]:
    """The steps that make rows of ``kind`` (RL rows are whole episodes)."""
    steps = Step.objects.filter(episode__in=episodes)
    if kind in (SnapshotKind.SFT, SnapshotKind.CT):
        steps = _own_steps(steps)
        return steps.filter(void=False)
    if kind == SnapshotKind.DPO:
        return steps.filter(Q(pk__in=_dpo_steps().filter(episode__in=episodes).values("pk"))
                            | Q(pk__in=_dpo_rejections().filter(episode__in=episodes).values("step_id"))
                            | Q(pk__in=[pair["branch_step"].pk for pair in branch_pairs(episodes).values()]))
    if kind == SnapshotKind.PRM:
        return _own_steps(steps)
    return steps


def rl_rows_are_steps(target: RenderedFor) -> bool:
    """Whether RL rows rendered for ``target`` are GRPO step rows rather than whole episodes: when it reads
    screenshots. Such a checkpoint is a vision-language one (a checkpoint is registered as reading screenshots only
    when its dir has a vision part), whose RL is GRPO through TRL on steps with their screenshots
    (trainer/vlm_grpo.py); the rows carry only what the target decides, as every other row kind does."""
    return target.reads_images


def row_count(kind: str, episodes: QuerySet[Episode], target: RenderedFor | None = None) -> int:
    """How many rows bucket ``kind`` makes of ``episodes`` rendered for ``target`` (None: a text target)."""
    if kind == SnapshotKind.RL and target is not None and rl_rows_are_steps(target):
        return _own_steps(Step.objects.filter(episode__in=episodes)).exclude(screenshot="").count()
    if kind == SnapshotKind.RL:
        return episodes.count()
    if kind == SnapshotKind.DPO:
        return (_dpo_steps().filter(episode__in=episodes).count()
                + _dpo_rejections().filter(episode__in=episodes).count() + branch_pair_count(episodes))
    if kind == SnapshotKind.PRM:
        return _prm_row_count(episodes)
    return bucket_steps(kind, episodes).count()


# --- process-reward labels (PRM rows) ---------------------------------------------------------------------
GOOD_STEP_LABEL = "good"  # of a review's step labels (good, wasteful, wrong, critical): only good is a good step


def prm_step_labels(episode: Episode) -> dict[int, dict]:
    """{step index: {"good": bool, "labels": {reviewer: label}}}: the step labels the episode's reviews gave
    (annotation writes them onto ``review_summary["step_labels"]``). A step is good when most of the reviewers who
    labelled it said good; wasteful, wrong and critical are bad, and so is a tie (a step one reviewer of two called
    wrong is not taught as good)."""
    by_step: dict[int, dict[str, str]] = {}
    for review in (episode.review_summary or {}).get("step_labels") or []:
        for key, label in (review.get("labels") or {}).items():
            try:
                index = int(key)
            except (TypeError, ValueError):
                continue
            by_step.setdefault(index, {})[str(review.get("reviewer") or "?")] = label
    return {index: {"good": 2 * sum(label == GOOD_STEP_LABEL for label in labels.values()) > len(labels),
                    "labels": labels} for index, labels in sorted(by_step.items())}


def prm_row_steps(labels: dict[int, dict], own: set[int]) -> list[int]:
    """The step indices that make PRM rows: the labelled steps in order up to and including the first bad one
    (PRM data, as PRM800K and Math-Shepherd in TRL, labels a trajectory up to its first mistake: what follows it
    starts from a state the mistake made), only those in ``own`` (a branch's copies of its parent's steps are the
    parent's rows; a bad copy still ends the branch's rows)."""
    out = []
    for index, label in labels.items():
        if index in own:
            out.append(index)
        if not label["good"]:
            break
    return out


def _prm_row_count(episodes: QuerySet[Episode]) -> int:
    own: dict[int, set[int]] = {}
    for episode_id, index in _own_steps(Step.objects.filter(episode__in=episodes)).values_list("episode_id", "index"):
        own.setdefault(episode_id, set()).add(index)
    return sum(len(prm_row_steps(prm_step_labels(episode), own.get(episode.pk, set())))
               for episode in episodes.only("pk", "review_summary"))


# --- a branch and its parent: a preference pair on the identical state --------------------------------------
def _judge_verdicts(episodes: list) -> dict[int, str]:
    """The judge's newest verdict of each of ``episodes`` (instances or ids) that has one."""
    return dict(Judgement.objects.filter(episode__in=episodes, latest=True).values_list("episode_id", "verdict"))


def episode_better(first: Episode, second: Episode, routing: dict,
                   verdicts: dict[int, str] | None = None) -> tuple[Episode | None, str]:
    """Which of two episodes went better, and by what: the reviews (accepted over rejected), else the reward (one
    clears the routing threshold, the other does not), else the judge's newest verdict (success over failure). The
    first signal that tells them apart decides; (None, "") when none does (both succeeded, both failed, unknown)."""
    def apart(a, b, good, bad) -> Episode | None:
        if a == good and b == bad:
            return first
        if a == bad and b == good:
            return second
        return None

    winner = apart(first.review_status, second.review_status, ReviewStatus.ACCEPTED, ReviewStatus.REJECTED)
    if winner is not None:
        return winner, "review"
    threshold = routing["reward_threshold"]

    def cleared(episode: Episode) -> bool | None:
        return None if episode.env_reward is None else episode.env_reward >= threshold

    winner = apart(cleared(first), cleared(second), True, False)
    if winner is not None:
        return winner, "reward"
    verdicts = _judge_verdicts([first, second]) if verdicts is None else verdicts
    winner = apart(verdicts.get(first.pk), verdicts.get(second.pk), JudgeVerdict.SUCCESS, JudgeVerdict.FAILURE)
    if winner is not None:
        return winner, "judge"
    return None, ""


def branch_pair(branch: Episode, routing: dict | None = None) -> dict | None:
    """The preference pair a finished branch makes with its parent, or None. From ``branched_at`` on, the two
    episodes are on the identical state (the branch replayed the parent's actions, checking the screen) until their
    actions differ: at that step k (the branch's first own step, or a later one when it repeated the parent's
    actions, the screens still matching), the better episode's step (:func:`episode_better`) is chosen over the
    other's. None: no parent any more, a parent without a step k, equal actions to the end, a void turn at k,
    screens that stopped matching, or neither episode better (:func:`branch_pair_explained` says which).
    ``{"index", "branch_step", "parent_step", "chosen": "branch" | "parent", "by"}``."""
    return branch_pair_explained(branch, routing)[0]


def screens_differ(step: Step, other: Step) -> str | None:
    """What makes two steps' screens count as different, in words (the address, then the elements read from the
    page, which can differ where the screenshots look alike: a focus, a hidden element); None when they match."""
    if step.url != other.url:
        return f"the address is {step.url or '(none)'} on one and {other.url or '(none)'} on the other"
    return elements_difference(other.elements, step.elements)


def branch_pair_explained(branch: Episode, routing: dict | None = None, *,
                          steps: dict[int, dict[int, Step]] | None = None,
                          verdicts: dict[int, str] | None = None) -> tuple[dict | None, str]:
    """(:func:`branch_pair`, and when there is none, why, in words for the review page). ``steps`` ({episode id:
    {index: step}}) and ``verdicts`` (the judge's, by episode) when the caller loaded them for many branches."""
    parent = branch.parent if branch.parent_id is not None else None
    if branch.branched_at is None:
        return None, f"Episode {branch.pk} is not a branch."
    if parent is None:
        return None, "Its parent episode was deleted, so there is nothing to compare its steps with."
    start = branch.branched_at
    if steps is None:
        steps = _steps_from([(branch.pk, start), (parent.pk, start)])
    mine = {i: s for i, s in steps.get(branch.pk, {}).items() if i >= start and "replayed_from" not in (s.info or {})}
    theirs = {i: s for i, s in steps.get(parent.pk, {}).items() if i >= start}
    index = start
    while True:
        if index not in mine or index not in theirs:
            if index == start and start not in theirs:
                return None, f"The parent has no step {start + 1} to compare with."
            if index == start:
                return None, f"The branch has no step {start + 1} of its own yet."
            return None, "Both took the same actions for as long as both had steps: no preference."
        step, other = mine[index], theirs[index]
        if step.action is None or other.action is None:
            return None, f"Step {index + 1} is a void turn (no action) in one of them: no pair."
        differs = screens_differ(step, other)
        if differs:
            return None, (f"At step {index + 1} the two screens differ ({differs}), so their steps are not on the same "
                          "state: no pair.")
        if step.action != other.action:
            break
        index += 1
    better, by = episode_better(branch, parent, routing or routing_of(branch.project), verdicts)
    if better is None:
        return None, (f"At step {index + 1} they acted differently, but neither episode did better (the reviews, the "
                      "reward and the judge do not tell them apart): no pair.")
    return {"index": index, "branch_step": step, "parent_step": other,
            "chosen": "branch" if better.pk == branch.pk else "parent", "by": by}, ""


def branch_pairs(episodes: QuerySet[Episode], routing: dict | None = None) -> dict[int, dict]:
    """{branch id: its pair} for the finished branches among ``episodes`` that make one."""
    branches = list(episodes.filter(parent__isnull=False, branched_at__isnull=False, status=EpisodeStatus.FINISHED)
                    .select_related("parent", "project"))
    if not branches:
        return {}
    routing = routing or routing_of(branches[0].project)
    # the steps and verdicts of every branch and parent in three queries, not three a branch
    steps = _steps_from([(e, b.branched_at) for b in branches for e in (b.pk, b.parent_id)])
    verdicts = _judge_verdicts([e for b in branches for e in (b.pk, b.parent_id)])
    out = {}
    for branch in branches:
        pair, _ = branch_pair_explained(branch, routing, steps=steps, verdicts=verdicts)
        if pair is not None:
            out[branch.pk] = pair
    return out


def _steps_from(starts: list[tuple[int, int]]) -> dict[int, dict[int, Step]]:
    """{episode id: {index: step}} of the given episodes' steps from the given index on."""
    first = {}
    for episode_id, start in starts:  # a parent of several branches: from the earliest branch point
        first[episode_id] = min(start, first.get(episode_id, start))
    out: dict[int, dict[int, Step]] = {}
    steps = Step.objects.filter(episode_id__in=list(first)).defer("prompt", "token_ids", "token_logprobs")
    for step in steps:
        if step.index >= first[step.episode_id]:
            out.setdefault(step.episode_id, {})[step.index] = step
    return out


def branch_pair_count(episodes: QuerySet[Episode]) -> int:
    """How many branch pairs ``episodes`` make (each differs in its action, by construction)."""
    return len(branch_pairs(episodes))


def buckets(project: Project) -> dict:
    """Rows, episodes and rows new since the last snapshot of each kind; ``rft`` counts the part of
    ``sft`` that autonomous successes make (rejection-sampled fine-tuning rows, frozen with SFT)."""
    routing = routing_of(project)
    target = export_target(project)
    out = {}
    for kind in SnapshotKind.values:
        episodes = bucket_episodes(project, kind, routing)
        frozen = SnapshotEpisode.objects.filter(snapshot__project=project, snapshot__kind=kind,
                                                snapshot__status=SnapshotStatus.READY).values("episode_id")
        out[kind] = {"rows": row_count(kind, episodes, target), "episodes": episodes.count(),
                     "new_rows": row_count(kind, episodes.exclude(pk__in=frozen), target)}
        if kind == SnapshotKind.SFT:
            rft = episodes.filter(mode=Mode.AUTONOMOUS)
            out["rft"] = {"rows": row_count(kind, rft), "episodes": rft.count(),
                          "new_rows": row_count(kind, rft.exclude(pk__in=frozen))}
    return out


# --- filters ---------------------------------------------------------------------------------------
def _date(value, field: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ApplicationError(f"'{field}' must be a date like 2026-12-31.", errors={field: ["Not a date."]}) from None


def filter_clean(project: Project, raw: dict | None) -> dict:
    """A snapshot filter, checked: unknown keys, foreign tasks and bad dates are refused with a message."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ApplicationError("The filter must be an object.", errors={"filter": ["Not an object."]})
    unknown = sorted(set(raw) - FILTER_KEYS)
    if unknown:
        raise ApplicationError(f"Unknown filter key '{unknown[0]}'; known: {', '.join(sorted(FILTER_KEYS))}.",
                               errors={"filter": [f"Unknown key {unknown[0]}."]})
    out: dict = {}
    if raw.get("tasks"):
        tasks = raw["tasks"]
        if not isinstance(tasks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tasks):
            raise ApplicationError("'tasks' must be a list of task ids.", errors={"tasks": ["Not a list of ids."]})
        known = set(project.tasks.filter(pk__in=tasks).values_list("pk", flat=True))
        missing = [t for t in tasks if t not in known]
        if missing:
            raise ApplicationError(f"Task {missing[0]} is not in this project.", errors={"tasks": ["Unknown task."]})
        out["tasks"] = sorted(known)
    if raw.get("split"):
        if raw["split"] not in Split.values:
            raise ApplicationError("'split' must be train or eval.", errors={"split": ["Invalid choice."]})
        out["split"] = raw["split"]
    checkpoint = raw.get("checkpoint")
    if checkpoint not in (None, ""):
        if not isinstance(checkpoint, int) or isinstance(checkpoint, bool) or \
                not project.checkpoints.filter(pk=checkpoint).exists():
            raise ApplicationError("No such checkpoint in this project.", errors={"checkpoint": ["Unknown checkpoint."]})
        out["checkpoint"] = checkpoint
    if raw.get("mode"):
        if raw["mode"] not in Mode.values:
            raise ApplicationError("'mode' must be autonomous or supervised.", errors={"mode": ["Invalid choice."]})
        out["mode"] = raw["mode"]
    for field in ("created_after", "created_before"):
        if raw.get(field):
            out[field] = _date(raw[field], field).isoformat()
    if "created_after" in out and "created_before" in out and out["created_after"] > out["created_before"]:
        raise ApplicationError("'created_after' is later than 'created_before'.",
                               errors={"created_after": ["After the end date."]})
    if raw.get("only_new"):
        out["only_new"] = True
    return out


def filter_apply(episodes: QuerySet[Episode], project: Project, kind: str, cleaned: dict) -> QuerySet[Episode]:
    if "tasks" in cleaned:
        episodes = episodes.filter(task_id__in=cleaned["tasks"])
    if "split" in cleaned:
        episodes = episodes.filter(task__split=cleaned["split"])
    if "checkpoint" in cleaned:
        episodes = episodes.filter(checkpoint_id=cleaned["checkpoint"])
    if "mode" in cleaned:
        episodes = episodes.filter(mode=cleaned["mode"])
    if "created_after" in cleaned:
        episodes = episodes.filter(created_at__date__gte=cleaned["created_after"])
    if "created_before" in cleaned:
        episodes = episodes.filter(created_at__date__lte=cleaned["created_before"])
    if cleaned.get("only_new"):
        frozen = SnapshotEpisode.objects.filter(snapshot__project=project, snapshot__kind=kind,
                                                snapshot__status=SnapshotStatus.READY).values("episode_id")
        episodes = episodes.exclude(pk__in=frozen)
    return episodes


# --- rows -------------------------------------------------------------------------------------------
def image_path(screenshot: str) -> str:
    """Where a screenshot lies inside an export bundle (``images/<name>``, relative to data.jsonl: what
    trainer/vlm.py resolves a row's images against)."""
    return f"images/{os.path.basename(screenshot)}" if screenshot else ""


def _checkpoint_style(uri: str) -> str:
    """The prompt style a checkpoint dir reads: its loupe.json's ``prompt_style``, else full (the rule of
    trainer.model.checkpoint_prompt_style, read from the file: flywheel knows the trainer by its files only)."""
    file = Path(uri) / "loupe.json" if uri else None
    if file is None or not file.is_file():
        return DEFAULT_STYLE
    try:
        return json.loads(file.read_text()).get("prompt_style") or DEFAULT_STYLE
    except (OSError, ValueError, AttributeError) as exc:
        raise ApplicationError(f"The deployed checkpoint's {file} cannot be read ({exc}); fix or re-register it.") \
            from None


# The tiny model's prompt style (trainer.model.TINY_PROMPT_STYLE): a run with no deployed checkpoint to start from
# trains the tiny model (flywheel.training.run_create), so that is what the rows are rendered for then.
TINY_STYLE = "named"


def export_target(project: Project) -> RenderedFor:
    """What the project's rows are rendered for: the checkpoint its next training run starts from (as
    flywheel.training.run_create picks it: the deployed one when its dir exists, else the tiny model). Its action
    format, prompt style (its loupe.json's), whether it reads screenshots, and then the project's
    ``history_images``. The tiny model: format loupe, the named prompt, no screenshots."""
    from flywheel import cycle_settings

    deployment = Deployment.objects.filter(project=project, active=True).select_related("checkpoint").first()
    checkpoint = deployment.checkpoint if deployment is not None else None
    if checkpoint is None or not checkpoint.uri or not Path(checkpoint.uri).is_dir():
        return RenderedFor(style=TINY_STYLE)
    history = cycle_settings.settings_of(project)["history_images"] if checkpoint.reads_images else 0
    try:
        return RenderedFor(style=_checkpoint_style(checkpoint.uri), action_format=checkpoint.action_format,
                           reads_images=checkpoint.reads_images, history_images=history)
    except ValueError as exc:
        raise ApplicationError(f"Checkpoint {checkpoint.name} cannot have rows rendered for it: {exc}.") from None


def _step_view(step: Step) -> StepView:
    """What a step showed and what ran, as the rollout's prompts showed it (the thought as written then)."""
    return StepView(instruction=step.instruction, url=step.url, elements=[Element(**e) for e in step.elements],
                    screen_text=step.screen_text, width=step.width, height=step.height, screenshot=image_path(step.screenshot), thought=step.thought,
                    action=Action.from_dict(step.action) if step.action else None, raw=step.raw_output)


def _turn(thought: str, action: dict | None, raw: str) -> Turn:
    if action:
        return Turn(thought=thought, action=Action.from_dict(action), void_reason=None, raw=raw)
    return Turn(thought=thought, action=None, void_reason="void turn", raw=raw)


def _rejections(step: Step) -> list[Rejection]:
    """The step's rejected proposals in attempt order: the list rows_iter fetched with the steps
    (``rejections_in_order``), else a query. (Through the related manager each of a row's reads built a new
    queryset: a tenth of a build's time.)"""
    fetched = getattr(step, "rejections_in_order", None)
    return fetched if fetched is not None else list(step.rejections.order_by("attempt"))


def _feedback(rejections: list[Rejection], step: Step, target: RenderedFor) -> str | None:
    """What the model was told at this step, as the rollout told it: the step's own feedback (a person's answer to
    its call_user) and then the rejections of these proposals of the step, in the target's format."""
    rejects = (rejection_feedback([(_turn(r.thought, r.action, r.raw_output), r.reason) for r in rejections],
                                  target.action_format, step.width, step.height) if rejections else None)
    return " ".join(part for part in (step.feedback, rejects) if part) or None


def step_thought(step: Step) -> str:
    """The thought of the executed turn (a person's correction when edited). Where what a person said aloud during
    the step was polished into a thought (flywheel/polish.py: done, or as a person edited it), that thought; a person
    who acted without writing a thought and without a polished one contributes what they said aloud, raw. On a step
    the model took and a person approved, what they said is commentary ("yes, that one"), not the model's reasoning:
    the model's thought stays unless a person edited the polished one into the thought they want trained on."""
    polished = step.polished_thought.strip() and (
        step.polish_state == PolishState.EDITED or (step.polish_state == PolishState.DONE and step.actor != Actor.MODEL))
    if polished:
        return step.polished_thought
    if not step.thought.strip() and step.actor != Actor.MODEL:
        return step.human_thought
    return step.thought


def _model_text(raw: str, spoken_in: str, thought: str, action: dict | None, step: Step, target: RenderedFor) -> str:
    """A model's answer (a proposal a person replaced or rejected) as the target writes it: as the model wrote it
    when that is the target's format, re-rendered from its canonical action when not; a void one as written."""
    if action is None or (raw and spoken_in == target.action_format):
        return raw
    return render_turn(thought, Action.from_dict(action), target, step.width, step.height)


def _meta(episode: Episode, step: Step | None = None, **extra) -> dict:
    meta = {"episode_id": episode.pk, "task": episode.task.task_name, "seed": episode.seed, "mode": episode.mode,
            "checkpoint": episode.checkpoint.name if episode.checkpoint_id else None, "episode_reward": episode.env_reward,
            "instruction": episode.instruction, "outcome": episode.outcome}
    if step is not None:
        meta.update(step_index=step.index, step_id=step.pk, actor=step.actor, screenshot=image_path(step.screenshot),
                    rejected=[{"attempt": r.attempt, "reason": r.reason,
                               "action": Action.from_dict(r.action).to_text() if r.action else "(not an action)"}
                              for r in _rejections(step)])
    return {**meta, **extra}


def _assistant(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


def _dpo_rows(step: Step, view: StepView, history: list[StepView], chosen: str, target: RenderedFor,
              episode: Episode) -> list[dict]:
    """The preference pairs one step makes: the person's turn over the model's proposal it replaced (when it
    changed the action, or only the thought: marked ``"differs": "thought"``), and the executed turn over
    each rejected proposal of the step whose action differs, under the prompt that proposal answered (with the
    feedback of the rejections before it)."""
    rows = []
    rejections = _rejections(step)
    if step.actor != Actor.MODEL and step.correction in (Correction.ACTION, Correction.THOUGHT) and step.proposal:
        proposal = step.proposal
        prompt, images = render_prompt(view, history, target, feedback=_feedback(rejections, step, target))
        rejected = _model_text(proposal.get("raw") or "", step.action_format, proposal.get("thought", ""),
                               proposal.get("action"), step, target)
        rows.append(DPORow(prompt=prompt, chosen=_assistant(chosen), rejected=_assistant(rejected), images=images,
                           meta=_meta(episode, step, pair="correction", differs=step.correction),
                           rendered_for=target).to_dict())
    if step.action is not None:
        for number, rejection in enumerate(rejections):
            if rejection.action == step.action:
                continue  # the person approved, in the end, what they had rejected: no preference
            prompt, images = render_prompt(view, history, target,
                                           feedback=_feedback(rejections[:number], step, target))
            rejected = _model_text(rejection.raw_output, rejection.action_format, rejection.thought, rejection.action,
                                   step, target)
            rows.append(DPORow(prompt=prompt, chosen=_assistant(chosen), rejected=_assistant(rejected), images=images,
                               meta=_meta(episode, step, pair="rejection", differs=Correction.ACTION,
                                          attempt=rejection.attempt, reason=rejection.reason),
                               rendered_for=target).to_dict())
    return rows


def _judge_meta(episode: Episode) -> dict | None:
    judgement = Judgement.objects.filter(episode=episode, latest=True).only("verdict", "reason", "confidence").first()
    if judgement is None:
        return None
    return {"verdict": judgement.verdict or None, "reason": judgement.reason, "confidence": judgement.confidence}


def _branch_pair_rows(branch: Episode, views: dict[int, tuple[StepView, int]], history: list[StepView],
                      target: RenderedFor) -> list[dict]:
    """The branch's pair with its parent (:func:`branch_pair`) as a DPO row: the prompt at step k as first sent there
    (the branch's history is the parent's, replayed; no rejection's feedback yet), the better episode's turn at k
    chosen over the other's, both in the target's format."""
    pair = branch_pair(branch)
    if pair is None or pair["index"] not in views:
        return []
    view, before = views[pair["index"]]
    prompt, images = render_prompt(view, history[:before], target)
    chosen, rejected = ((pair["branch_step"], pair["parent_step"]) if pair["chosen"] == "branch"
                        else (pair["parent_step"], pair["branch_step"]))

    def text(step: Step) -> str:
        return render_turn(step_thought(step), Action.from_dict(step.action), target, step.width, step.height)

    step = pair["branch_step"]
    return [DPORow(prompt=prompt, chosen=_assistant(text(chosen)), rejected=_assistant(text(rejected)), images=images,
                   meta=_meta(branch, step, pair="branch", differs=Correction.ACTION, parent_episode=branch.parent_id,
                              parent_step_id=pair["parent_step"].pk, chosen_episode=chosen.episode_id,
                              rejected_episode=rejected.episode_id, decided_by=pair["by"]),
                   rendered_for=target).to_dict()]


def _grpo_row(step: Step, view: StepView, history: list[StepView], prefix: list[Action], target: RenderedFor,
              episode: Episode) -> dict:
    """A step as GRPO of a screen-reading checkpoint samples answers to it (agent.rows.GRPORow): the prompt it was
    sent, with its screenshots, and an env reward that replays ``prefix`` (the episode's executed actions before it;
    void turns ran nothing) on the episode's seed, then runs the answer. The step's own answer is not in the row:
    GRPO scores fresh ones."""
    prompt, images = render_prompt(view, history, target,
                                   feedback=_feedback(_rejections(step), step, target))
    reward = GRPORow.env_reward(episode.task.env_kind, episode.task.task_name, episode.seed, prefix,
                                episode.task.definition)
    return GRPORow(messages=prompt, images=images, format=target.action_format, reward=reward, width=step.width,
                   height=step.height, meta=_meta(episode, step, void=step.void, step_reward=step.reward),
                   rendered_for=target).to_dict()


def episode_rows(kind: str, episode: Episode, steps: list[Step], target: RenderedFor | None = None) -> list[dict]:
    """The rows ``kind`` makes of one episode (``steps`` ordered by index), rendered for ``target`` (agent.rows)
    from the steps' structure: the prompt each step was (or would have been) sent, the executed turn in the
    target's format. ApplicationError names a step that cannot be written in that format.

    RL rows are the whole episode for a text target (trainer/rl.py's loops), and one GRPO row a step with a
    screenshot for a target that reads screenshots (:func:`rl_rows_are_steps`), void steps included: the model was
    prompted there and wrote nothing the env could run, which is where GRPO's fresh answers have most to teach."""
    target = target or RenderedFor()
    history: list[StepView] = []
    prefix: list[Action] = []  # the canonical actions that brought the env to the step (GRPO rows)
    rows, rl_steps = [], []
    views: dict[int, tuple[StepView, int]] = {}  # step index -> its view and how many steps came before it
    labels = prm_step_labels(episode) if kind == SnapshotKind.PRM else {}
    prm_at = set(prm_row_steps(labels, {s.index for s in steps if "replayed_from" not in (s.info or {})})) \
        if kind == SnapshotKind.PRM else set()
    judge = _judge_meta(episode) if kind == SnapshotKind.PRM else None
    screens: dict = {}  # each step's screen text, rendered once for all the prompts it shows in (render_prompt)
    for step in steps:
        view = _step_view(step)
        copied = "replayed_from" in (step.info or {})  # a branch's copy of its parent's step: the parent's row
        try:
            chosen = render_turn(step_thought(step), view.action, target, step.width, step.height, raw=step.raw_output)
            if copied and not (kind == SnapshotKind.RL and not rl_rows_are_steps(target)):
                pass  # the history still holds it; a whole-episode RL row keeps the trajectory as it ran
            elif kind in (SnapshotKind.SFT, SnapshotKind.CT) and not step.void:
                prompt, images = render_prompt(view, history, target, screens=screens,
                                               feedback=_feedback(_rejections(step), step, target))
                source = "rft" if episode.mode == Mode.AUTONOMOUS else "supervised"
                rows.append(SFTRow(messages=[*prompt, *_assistant(chosen)], images=images,
                                   meta=_meta(episode, step, source=source), rendered_for=target).to_dict())
            elif kind == SnapshotKind.DPO:
                rows.extend(_dpo_rows(step, view, history, chosen, target, episode))
            elif kind == SnapshotKind.PRM and step.index in prm_at:
                prompt, images = render_prompt(view, history, target, screens=screens,
                                               feedback=_feedback(_rejections(step), step, target))
                label = labels[step.index]
                rows.append(PRMRow(prompt=prompt_text(prompt), completions=[chosen], labels=[label["good"]],
                                   prompt_messages=prompt, images=images,
                                   meta=_meta(episode, step, label_source="review", step_labels=label["labels"],
                                              reviewers=sorted(label["labels"]),
                                              first_error=not label["good"], review_status=episode.review_status,
                                              judge=judge),
                                   rendered_for=target).to_dict())
            elif kind == SnapshotKind.RL and rl_rows_are_steps(target):
                if step.screenshot:
                    rows.append(_grpo_row(step, view, history, prefix, target, episode))
            elif kind == SnapshotKind.RL:
                prompt, images = render_prompt(view, history, target, screens=screens,
                                               feedback=_feedback(_rejections(step), step, target))
                rl_steps.append(RLStepRow(prompt=prompt, output=step.raw_output, output_token_ids=step.token_ids,
                                          old_logprobs=step.token_logprobs, reward=step.reward, void=step.void,
                                          image=image_path(step.screenshot), images=images, step_id=step.pk))
        except ValueError as exc:
            raise ApplicationError(f"Step {step.index} of episode {episode.pk} cannot be written for the deployed "
                                   f"checkpoint ({target.describe()}): {exc}") from None
        views[step.index] = (view, len(history))
        history.append(view)
        if view.action is not None:
            prefix.append(view.action)
    if kind == SnapshotKind.DPO and episode.parent_id is not None:
        rows.extend(_branch_pair_rows(episode, views, history, target))
    if kind == SnapshotKind.RL and rl_steps:
        rows.append(RLRow(episode_id=episode.pk, task=episode.task.task_name, seed=episode.seed,
                          reward=float(episode.env_reward or 0.0), group=f"{episode.task.task_name}:{episode.seed}",
                          steps=rl_steps, meta=_meta(episode), rendered_for=target).to_dict())
    return rows


def rows_iter(kind: str, episode_ids: Sequence[int], chunk: int = 200,
              target: RenderedFor | None = None) -> Iterator[tuple[Episode, list[dict]]]:
    """(episode, its rows rendered for ``target``) for each of ``episode_ids`` (a snapshot's frozen membership, in
    id order) that still exists, reading ``chunk`` episodes at a time. Each batch asks for its own ids only: a
    query that filtered the whole membership (``pk__in`` all of it) for each batch grew with the snapshot, squared."""
    base = Episode.objects.select_related("task", "checkpoint").order_by("pk")
    # Rows are rendered from the steps' structure: the prompt as it was sent (the largest column) is never read, nor
    # are the tokens and log-probs outside RL rows, so they are not fetched (decoding them was a third of the time);
    # nor are the timestamps (parsing them was a tenth of the fetch).
    unread = ("prompt", "timings", "polish_source", "polish_error", "started_at", "created_at", "polished_at") + (
        () if kind == SnapshotKind.RL else ("token_ids", "token_logprobs"))
    for start in range(0, len(episode_ids), chunk):
        batch = list(base.filter(pk__in=episode_ids[start:start + chunk]))
        if not batch:
            continue
        by_episode: dict[int, list[Step]] = {e.pk: [] for e in batch}
        for step in _steps_of(list(by_episode), unread):
            by_episode[step.episode_id].append(step)
        for episode in batch:
            yield episode, episode_rows(kind, episode, by_episode[episode.pk], target)


def _steps_of(episode_ids: list[int], unread: Sequence[str]) -> list[Step]:
    """The steps of ``episode_ids`` in (episode, index) order without the ``unread`` columns (read on access, as a
    deferred field is), each with its rejections in attempt order as ``rejections_in_order`` (read by _rejections).

    They are real Step instances made from ``values_list`` rows: Django's own instantiation, one setattr per field
    with its checks, took half of a snapshot's fetch time; the values are the same converted values the ORM sets."""
    names = [field.attname for field in Step._meta.concrete_fields if field.attname not in unread]
    rows = Step.objects.filter(episode_id__in=episode_ids).order_by("episode_id", "index").values_list(*names)
    steps, by_id, db = [], {}, rows.db
    for row in rows.iterator(chunk_size=2000):
        step = Step.__new__(Step)
        step.__dict__.update(zip(names, row))
        step._state = ModelState()
        step._state.adding, step._state.db = False, db
        step.rejections_in_order = []
        steps.append(step)
        by_id[step.pk] = step
    for rejection in Rejection.objects.filter(step__episode_id__in=episode_ids).order_by("step_id", "attempt"):
        by_id[rejection.step_id].rejections_in_order.append(rejection)
    return steps
