"""What an episode's reviews conclude, below both reviews.py and queues.py (each writes it, neither imports the
other for it): the newest adjudicated verdict of a queue, the summary written onto the episode (routing and the PRM
export read it there), and a review as the API shows it."""
from __future__ import annotations

from annotation.models import ItemState, QueueItem, Review
from rollouts import episodes


def final_verdict(*, episode_id: int) -> str:
    """The newest adjudicated verdict on the episode, from any queue ('' when none)."""
    return (QueueItem.objects.filter(episode_id=episode_id, state=ItemState.ADJUDICATED)
            .order_by("-adjudicated_at").values_list("final_verdict", flat=True).first() or "")


def episode_summary_refresh(*, episode_id: int) -> None:
    """Write the episode's review counts and status from its reviews, and a queue's adjudicated verdict
    when a manager recorded one (it decides the status)."""
    rows = list(Review.objects.filter(episode_id=episode_id).order_by("reviewer_id")
                .values_list("verdict", "grade", "step_labels", "reviewer__username"))
    episodes.episode_review_summary_set(episode_id=episode_id, verdicts=[v for v, *_ in rows],
                                        grades=[g for _, g, *_ in rows if g is not None],
                                        final_verdict=final_verdict(episode_id=episode_id),
                                        step_labels=step_labels_summary(rows))


def step_labels_summary(rows) -> list[dict]:
    """The step labels of an episode's reviews as the episode keeps them (flywheel's PRM export reads them there,
    never this app): one entry a review that labelled a step, by reviewer id. ``rows``: (verdict, grade,
    step_labels, reviewer's username)."""
    return [{"reviewer": username, "verdict": verdict, "labels": labels}
            for verdict, _, labels, username in rows if labels]


def review_payload(review: Review) -> dict:
    return {"id": review.pk, "episode": review.episode_id,
            "reviewer": {"id": review.reviewer_id, "username": review.reviewer.username},
            "verdict": review.verdict, "grade": review.grade, "step_labels": review.step_labels,
            "comment": review.comment, "created_at": review.created_at.isoformat(),
            "updated_at": review.updated_at.isoformat()}
