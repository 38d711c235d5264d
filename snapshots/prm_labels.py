"""Process-reward labels: which of an episode's steps its reviews called good, and which of them make PRM rows."""
from __future__ import annotations

from rollouts.models import Episode

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

