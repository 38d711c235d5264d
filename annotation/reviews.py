"""Reviews: a manager's (or a queue assignee's) verdict, grade, step labels and comment on a finished episode, and how far
reviewers agree. The conclusion is written onto the episode through flywheel's services (routing
reads it there)."""
from __future__ import annotations

from collections import Counter, defaultdict

from django.db import transaction

from annotation import queues
from annotation.models import Review, Verdict
from annotation.review_summary import episode_summary_refresh
from rollouts import privacy
from rollouts.models import Episode, EpisodeStatus
from core.audit import audit_record
from core.errors import ApplicationError
from core.limits import check_length
from core.stats import cohen_kappa

STEP_LABELS = ("good", "wasteful", "wrong", "critical")


def _clean_labels(episode: Episode, step_labels: dict) -> dict:
    if not isinstance(step_labels, dict):
        raise ApplicationError("'step_labels' must map step indices to labels.", errors={"step_labels": ["Not an object."]})
    indices = set(episode.steps.values_list("index", flat=True))
    out = {}
    for key, label in step_labels.items():
        if label in (None, ""):
            continue
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ApplicationError(f"Step label key '{key}' is not a step index.",
                                   errors={"step_labels": [f"Bad index {key}."]}) from None
        if index not in indices:
            raise ApplicationError(f"Episode {episode.pk} has no step {index + 1} (labels are keyed by the step's index "
                                   f"from 0: {index}).", errors={"step_labels": [f"No step at index {index}."]})
        if label not in STEP_LABELS:
            raise ApplicationError(f"Unknown step label '{label}'; use {', '.join(STEP_LABELS)}.",
                                   errors={"step_labels": [f"Bad label {label}."]})
        out[str(index)] = label
    return out


@transaction.atomic
def review_submit(*, episode: Episode, reviewer, verdict: str, grade: int | None = None,
                  step_labels: dict | None = None, comment: str = "") -> Review:
    """Create or replace ``reviewer``'s review of a finished episode, then update the episode's summary."""
    episode = Episode.objects.select_for_update().get(pk=episode.pk)
    if episode.status not in (EpisodeStatus.FINISHED, EpisodeStatus.FAILED):
        raise ApplicationError(f"Episode {episode.pk} is {episode.status}; review it once it has finished.", status=409)
    if verdict not in Verdict.values:
        raise ApplicationError("'verdict' must be accept or reject.", errors={"verdict": ["Invalid choice."]})
    if grade is not None and not (isinstance(grade, int) and 1 <= grade <= 5):
        raise ApplicationError("'grade' must be a whole number from 1 to 5.", errors={"grade": ["Out of range."]})
    labels = _clean_labels(episode, step_labels or {})
    check_length("review_comment", comment, field="comment")
    comment = privacy.text_redact(settings=episode.project.settings, text=comment)  # stored redacted (issue 40)
    review, created = Review.objects.update_or_create(
        episode=episode, reviewer=reviewer,
        defaults={"verdict": verdict, "grade": grade, "step_labels": labels, "comment": comment})
    queues.queue_review_recorded(episode=episode, reviewer=reviewer)
    episode_summary_refresh(episode_id=episode.pk)
    audit_record(actor=reviewer, action="review.create" if created else "review.update", target=episode,
                 data={"verdict": verdict, "grade": grade})
    return review


def agreement(*, project) -> dict:
    """Per project: among episodes with two or more reviews, the share whose verdicts all agree, and
    Cohen's kappa over every pair of reviews of one episode (reviewers ordered by id)."""
    by_episode: dict[int, list[tuple[int, str]]] = defaultdict(list)
    reviewers: dict[str, Counter] = defaultdict(Counter)
    reviews = Review.objects.filter(episode__project=project).values_list("episode_id", "reviewer_id",
                                                                          "reviewer__username", "verdict")
    for episode_id, reviewer_id, username, verdict in reviews.iterator(chunk_size=5000):
        by_episode[episode_id].append((reviewer_id, verdict))
        reviewers[username]["reviews"] += 1
        reviewers[username]["accepts"] += verdict == Verdict.ACCEPT
    multi = [sorted(v) for v in by_episode.values() if len(v) >= 2]
    pairs = [(a[1], b[1]) for verdicts in multi for i, a in enumerate(verdicts) for b in verdicts[i + 1:]]
    agree = sum(len({v for _, v in verdicts}) == 1 for verdicts in multi)
    kappa = cohen_kappa(pairs)
    return {"episodes_with_multiple_reviews": len(multi),
            "agreement": round(agree / len(multi), 4) if multi else None,
            "kappa": round(kappa, 4) if kappa is not None else None,
            "reviewers": [{"username": name, "reviews": c["reviews"], "accepts": c["accepts"]}
                          for name, c in sorted(reviewers.items())]}
