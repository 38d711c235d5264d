"""A branch and its parent: a preference pair on the identical state (a DPO row, snapshots/snapshot_kinds.py).

From a branch's ``branched_at`` on, the branch replayed its parent's actions, checking the screen; at the first step
where their actions differ, the better episode's step is chosen over the other's."""
from __future__ import annotations

from django.db.models import QuerySet

from agent.screen_match import elements_difference
from rollouts.models import Episode, EpisodeStatus, Judgement, JudgeVerdict, ReviewStatus, Step
from rollouts.routing import routing_of


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
