"""Review queues: a manager freezes a review-list filter into items that ``overlap`` assignees each review
independently. An assignee asks for the next item and holds it for ``LOUPE_REVIEW_HOLD_SECONDS``; their
review (``reviews.review_submit``) counts towards the item; when the item's reviews disagree a manager
adjudicates, and the final verdict is what the episode's review status (and so routing) reads.

Who may review: managers and admins review any episode of their project (as before); an annotator
reviews an episode only while they hold it from a queue that assigns them. Only managers create queues
and adjudicate.

Two reviewers asking at once: ``queue_next`` locks the candidate item rows with ``FOR UPDATE SKIP
LOCKED`` and counts the item's places only once it holds the row, so no item is ever given to more
reviewers than its overlap."""
from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.models import ClaimState, ItemState, QueueClaim, QueueItem, QueueState, Review, ReviewQueue, Verdict
from annotation.review_summary import episode_summary_refresh, review_payload
from core.audit import audit_record
from core.errors import ApplicationError
from core.limits import check_length
from core.stats import cohen_kappa
from rollouts import privacy
from projects import selectors
from rollouts import selectors as rollout_selectors
from rollouts.models import Episode, EpisodeStatus
from projects.models import Membership, Project, Role

FILTER_KEYS = ("task", "checkpoint", "annotator", "split", "mode", "status", "outcome", "review_status", "reward_min",
               "reward_max", "has_interventions", "has_void", "created_after", "created_before")
REVIEWABLE = (EpisodeStatus.FINISHED, EpisodeStatus.FAILED)
MAX_OVERLAP = 5


def hold_seconds() -> int:
    """How long a reviewer holds an item they were given (the setting, 15 minutes by default)."""
    return int(settings.LOUPE_REVIEW_HOLD_SECONDS)


def _bad(field: str, message: str) -> ApplicationError:
    return ApplicationError(message, errors={field: [message]})


# --- creating ----------------------------------------------------------------------------------------
@transaction.atomic
def queue_create(*, project: Project, actor, name: str, filter: dict, overlap: int, assignees: list[int]) -> ReviewQueue:
    """A queue of every finished or failed episode of ``project`` that the review-list ``filter`` matches."""
    name = (name or "").strip()
    if not name:
        raise _bad("name", "Give the queue a name.")
    check_length("queue_name", name, field="name")
    if ReviewQueue.objects.filter(project=project, name=name).exists():
        raise _bad("name", f"{project.name} already has a queue named '{name}'; pick another name.")
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 1 <= overlap <= MAX_OVERLAP:
        raise _bad("overlap", f"'overlap' (reviewers per episode) must be a whole number from 1 to {MAX_OVERLAP}.")
    if not isinstance(filter, dict):
        raise _bad("filter", "'filter' must be an object of the review list's filters.")
    unknown = sorted(set(filter) - set(FILTER_KEYS))
    if unknown:
        raise _bad("filter", f"Unknown filter {', '.join(unknown)}; use {', '.join(FILTER_KEYS)}.")
    params = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in filter.items() if v not in ("", None)}
    ids = list(dict.fromkeys(assignees or []))
    if not ids:
        raise _bad("assignees", "Assign at least one reviewer.")
    members = dict(Membership.objects.filter(project=project, user_id__in=ids).values_list("user_id", "role"))
    strangers = [i for i in ids if i not in members]
    if strangers:
        raise _bad("assignees", f"Users {', '.join(map(str, strangers))} are not members of {project.name}.")
    if overlap > len(ids):
        raise _bad("overlap", f"{overlap} reviewers per episode needs at least {overlap} assignees; "
                              f"{len(ids)} are assigned.")
    episodes = rollout_selectors.episodes_filter(Episode.objects.filter(project=project, status__in=REVIEWABLE), params)
    episode_ids = list(episodes.order_by("id").values_list("id", flat=True))
    if not episode_ids:
        raise _bad("filter", "No finished episode matches this filter; widen it before making a queue.")
    queue = ReviewQueue.objects.create(project=project, name=name, filter=params, overlap=overlap,
                                       created_by=actor)
    queue.assignees.set(ids)
    QueueItem.objects.bulk_create([QueueItem(queue=queue, episode_id=e) for e in episode_ids])
    audit_record(actor=actor, action="queue.create", target=project,
                 data={"queue": queue.pk, "name": queue.name, "overlap": overlap, "episodes": len(episode_ids),
                       "assignees": ids})
    return queue


@transaction.atomic
def queue_state_set(*, queue: ReviewQueue, actor, state: str) -> ReviewQueue:
    if state not in QueueState.values:
        raise _bad("state", "'state' must be open or closed.")
    ReviewQueue.objects.filter(pk=queue.pk).update(state=state)
    audit_record(actor=actor, action=f"queue.{state}", target=queue.project, data={"queue": queue.pk})
    queue.refresh_from_db()
    return queue


# --- reading -----------------------------------------------------------------------------------------
def queues_for_user(*, user, project: Project, role: str) -> QuerySet[ReviewQueue]:
    """Managers see every queue of the project; annotators the queues that assign them."""
    queues = ReviewQueue.objects.filter(project=project).select_related("created_by").prefetch_related("assignees")
    return queues if selectors.role_at_least(role, Role.MANAGER) else queues.filter(assignees=user)


def queue_for_user(*, user, queue_id: int, manager: bool = False) -> tuple[ReviewQueue, str]:
    """The queue and the user's role: 404 when they are not a member of its project, 403 when they are
    neither a manager nor (unless ``manager``) one of its assignees."""
    queue = ReviewQueue.objects.select_related("project").filter(pk=queue_id).first()
    role = selectors.project_role(user=user, project=queue.project_id) if queue else None
    if queue is None or role is None:
        raise ApplicationError("No such review queue, or you are not a member of its project.", status=404)
    if selectors.role_at_least(role, Role.MANAGER):
        return queue, role
    if manager:
        raise ApplicationError("Only managers may do this.", status=403)
    if not queue.assignees.filter(pk=user.pk).exists():
        raise ApplicationError("You are not assigned to this queue.", status=403)
    return queue, role


def item_for_user(*, user, item_id: int, manager: bool = False) -> QueueItem:
    item = QueueItem.objects.select_related("queue__project", "episode").filter(pk=item_id).first()
    if item is None or selectors.project_role(user=user, project=item.queue.project_id) is None:
        raise ApplicationError("No such queue item, or you are not a member of its project.", status=404)
    queue_for_user(user=user, queue_id=item.queue_id, manager=manager)
    return item


def _live(now: dt.datetime) -> Q:
    """Claims that take one of an item's places: reviewed, or held and not yet expired."""
    return Q(state=ClaimState.REVIEWED) | Q(state=ClaimState.HELD, held_until__gt=now)


# --- next, release, review ---------------------------------------------------------------------------
def queue_next(*, queue: ReviewQueue, reviewer) -> QueueClaim | None:
    """The reviewer's hold on their next item: the one they hold already, else the oldest pending item
    they have neither reviewed nor skipped that has a free place; None when there is none."""
    if queue.state != QueueState.OPEN:
        raise ApplicationError(f"Queue '{queue.name}' is closed.", status=409)
    if not queue.assignees.filter(pk=reviewer.pk).exists():
        raise ApplicationError("You are not assigned to this queue.", status=403)
    now = timezone.now()
    until = now + dt.timedelta(seconds=hold_seconds())
    with transaction.atomic():
        held = QueueClaim.objects.select_for_update().filter(item__queue=queue, reviewer=reviewer,
                                                             state=ClaimState.HELD, held_until__gt=now,
                                                             item__state=ItemState.PENDING).first()
        if held is not None:
            QueueClaim.objects.filter(pk=held.pk).update(held_until=until)
            held.held_until = until
            return held
        taken = Subquery(QueueClaim.objects.filter(_live(now), item=OuterRef("pk")).exclude(reviewer=reviewer)
                         .values("item").annotate(n=Count("pk")).values("n"), output_field=IntegerField())
        candidates = (QueueItem.objects.filter(queue=queue, state=ItemState.PENDING)
                      .exclude(claims__reviewer=reviewer, claims__state__in=[ClaimState.REVIEWED, ClaimState.SKIPPED])
                      .annotate(taken=Coalesce(taken, 0)).filter(taken__lt=queue.overlap).order_by("id"))
        # Rows another reviewer is claiming right now are skipped; when only such rows are left, wait for
        # them, since overlap > 1 may leave a place on them for this reviewer too. Places are counted
        # again under the row lock (each statement sees what committed before it), and an item found
        # full is passed over.
        full: list[int] = []
        while True:
            left = candidates.exclude(pk__in=full)
            item = left.select_for_update(skip_locked=True, of=("self",)).first() or \
                left.select_for_update(of=("self",)).first()
            if item is None:
                return None
            if item.claims.filter(_live(now)).exclude(reviewer=reviewer).count() < queue.overlap:
                break
            full.append(item.pk)
        claim, _ = QueueClaim.objects.update_or_create(item=item, reviewer=reviewer,
                                                       defaults={"state": ClaimState.HELD, "held_until": until})
        return claim


@transaction.atomic
def queue_release(*, item: QueueItem, reviewer, skip: bool) -> None:
    """Let the item go before its hold expires; ``skip`` also keeps it from being offered to them again."""
    claim = QueueClaim.objects.select_for_update().filter(item=item, reviewer=reviewer, state=ClaimState.HELD).first()
    if claim is None:
        return
    if skip:
        QueueClaim.objects.filter(pk=claim.pk).update(state=ClaimState.SKIPPED)
    else:
        claim.delete()


def may_review(*, episode: Episode, reviewer) -> bool:
    """Whether the (annotator) reviewer holds this episode, unexpired, from an open queue."""
    return QueueClaim.objects.filter(item__episode=episode, item__queue__state=QueueState.OPEN, reviewer=reviewer,
                                     state=ClaimState.HELD, held_until__gt=timezone.now()).exists()


def _settle(item: QueueItem) -> None:
    """Recount the item's reviews and move it to done or adjudication once it has ``overlap`` of them."""
    reviewers = list(item.claims.filter(state=ClaimState.REVIEWED).values_list("reviewer_id", flat=True))
    verdicts = set(Review.objects.filter(episode_id=item.episode_id, reviewer_id__in=reviewers)
                   .values_list("verdict", flat=True))
    state = item.state
    if item.state != ItemState.ADJUDICATED:
        if len(reviewers) < item.queue.overlap:
            state = ItemState.PENDING
        else:
            state = ItemState.DONE if len(verdicts) == 1 else ItemState.ADJUDICATION
    QueueItem.objects.filter(pk=item.pk).update(reviews_done=len(reviewers), state=state)


def queue_review_recorded(*, episode: Episode, reviewer) -> None:
    """Called by ``review_submit`` inside its transaction: the reviewer's hold on this episode becomes a
    review that counts, and each item it touches is settled. A hold that expired counts only while the
    item still has a free place (else the review stands on the episode but not in the queue)."""
    now = timezone.now()
    items = QueueItem.objects.select_for_update(of=("self",)).select_related("queue") \
        .filter(episode=episode, claims__reviewer=reviewer).order_by("id")
    for item in items:
        claim = item.claims.get(reviewer=reviewer)
        if claim.state == ClaimState.HELD:
            others = item.claims.filter(_live(now)).exclude(pk=claim.pk).count()
            if claim.held_until > now or others < item.queue.overlap:
                QueueClaim.objects.filter(pk=claim.pk).update(state=ClaimState.REVIEWED)
            else:
                claim.delete()
        _settle(item)


@transaction.atomic
def item_adjudicate(*, item: QueueItem, actor, verdict: str, comment: str = "") -> QueueItem:
    """A manager's final verdict on an item whose reviews disagree (or a change of an earlier one)."""
    item = QueueItem.objects.select_for_update().select_related("queue").get(pk=item.pk)
    if item.state not in (ItemState.ADJUDICATION, ItemState.ADJUDICATED):
        raise ApplicationError(f"This item is {item.state}: only items whose reviews disagree go to adjudication.",
                               status=409)
    if verdict not in Verdict.values:
        raise _bad("verdict", "'verdict' must be accept or reject.")
    check_length("adjudication_comment", comment, field="comment")
    comment = privacy.text_redact(settings=item.queue.project.settings, text=comment)  # stored redacted (issue 40)
    QueueItem.objects.filter(pk=item.pk).update(state=ItemState.ADJUDICATED, final_verdict=verdict,
                                                adjudicated_by=actor, adjudicated_at=timezone.now(),
                                                adjudication_comment=comment)
    episode_summary_refresh(episode_id=item.episode_id)
    audit_record(actor=actor, action="queue.adjudicate", target=item.episode,
                 data={"queue": item.queue_id, "item": item.pk, "verdict": verdict})
    item.refresh_from_db()
    return item


# --- progress and agreement ----------------------------------------------------------------------------
def _outcome(item_state: str, final: str, verdicts: list[str]) -> str:
    """The item's settled verdict: the adjudicated one, or the reviewers' common one; '' while unsettled."""
    if item_state == ItemState.ADJUDICATED:
        return final
    if item_state == ItemState.DONE and verdicts:
        return verdicts[0]
    return ""


def queue_progress(*, queue: ReviewQueue) -> dict:
    """Counts per item state, reviews done of those needed, and per reviewer: reviewed, skipped, holding."""
    now = timezone.now()
    states = Counter(dict(queue.items.values_list("state").annotate(n=Count("pk")).values_list("state", "n")))
    claims = QueueClaim.objects.filter(item__queue=queue).values_list("reviewer_id", "state", "held_until")
    per = defaultdict(Counter)
    for reviewer_id, state, until in claims:
        if state == ClaimState.HELD:
            per[reviewer_id]["holding"] += until > now
        else:
            per[reviewer_id][state] += 1
    total = sum(states.values())
    users = dict(get_user_model().objects.filter(pk__in=queue.assignees.values("pk")).values_list("pk", "username"))
    return {"items": total, **{s: states.get(s, 0) for s in ItemState.values},
            "reviews_done": sum(per[r]["reviewed"] for r in per), "reviews_needed": total * queue.overlap,
            "reviewers": [{"id": pk, "username": name, "reviewed": per[pk]["reviewed"], "skipped": per[pk]["skipped"],
                           "holding": per[pk]["holding"]} for pk, name in sorted(users.items(), key=lambda u: u[1])]}


def queue_agreement(*, queue: ReviewQueue) -> dict:
    """Among items with two or more counted reviews: the share whose verdicts all agree and Cohen's kappa
    over every pair of them; per reviewer: how often their verdict matched the item's settled verdict
    (agreed or adjudicated), and kappa between them and it."""
    counted = QueueClaim.objects.filter(item__queue=queue, state=ClaimState.REVIEWED) \
        .values_list("item_id", "item__episode_id", "item__state", "item__final_verdict", "reviewer_id",
                     "reviewer__username")
    wanted = defaultdict(list)
    meta = {}
    for item_id, episode_id, state, final, reviewer_id, username in counted:
        wanted[episode_id].append(reviewer_id)
        meta[(episode_id, reviewer_id)] = (item_id, state, final, username)
    verdict_of = {(e, r): v for e, r, v in Review.objects.filter(episode_id__in=list(wanted))
                  .values_list("episode_id", "reviewer_id", "verdict")}
    by_item: dict[int, list[tuple[int, str, str]]] = defaultdict(list)
    info = {}
    for (episode_id, reviewer_id), (item_id, state, final, username) in meta.items():
        verdict = verdict_of.get((episode_id, reviewer_id))
        if verdict:
            by_item[item_id].append((reviewer_id, username, verdict))
            info[item_id] = (state, final)
    multi = {i: sorted(v) for i, v in by_item.items() if len(v) >= 2}
    pairs = [(a[2], b[2]) for v in multi.values() for n, a in enumerate(v) for b in v[n + 1:]]
    agree = sum(len({x[2] for x in v}) == 1 for v in multi.values())
    kappa = cohen_kappa(pairs)
    per: dict[str, list[tuple[str, str]]] = defaultdict(list)
    counts = Counter()
    for item_id, v in by_item.items():
        state, final = info[item_id]
        settled = _outcome(state, final, [x[2] for x in v])
        for _, username, verdict in v:
            counts[username] += 1
            if settled:
                per[username].append((verdict, settled))
    reviewers = []
    for username in sorted(counts):
        p = per[username]
        k = cohen_kappa(p)
        reviewers.append({"username": username, "reviews": counts[username], "settled": len(p),
                          "agreement": round(sum(a == b for a, b in p) / len(p), 4) if p else None,
                          "kappa": round(k, 4) if k is not None else None})
    return {"items_with_multiple_reviews": len(multi),
            "agreement": round(agree / len(multi), 4) if multi else None,
            "kappa": round(kappa, 4) if kappa is not None else None, "reviewers": reviewers}


# --- payloads ------------------------------------------------------------------------------------------
def queue_payload(queue: ReviewQueue, *, detail: bool = False) -> dict:
    out = {"id": queue.pk, "project": queue.project_id, "name": queue.name, "filter": queue.filter,
           "overlap": queue.overlap, "state": queue.state, "hold_seconds": hold_seconds(),
           "created_by": queue.created_by.username, "created_at": queue.created_at.isoformat(),
           "assignees": [{"id": u.pk, "username": u.username} for u in queue.assignees.all()],
           "progress": queue_progress(queue=queue)}
    if detail:
        out["agreement"] = queue_agreement(queue=queue)
        out["adjudication"] = [item_payload(i) for i in queue.items.filter(
            state__in=[ItemState.ADJUDICATION, ItemState.ADJUDICATED]).select_related("episode__task", "adjudicated_by")]
    return out


def item_payload(item: QueueItem, *, with_reviews: bool = True) -> dict:
    out = {"id": item.pk, "queue": item.queue_id, "episode": item.episode_id, "state": item.state,
           "reviews_done": item.reviews_done, "final_verdict": item.final_verdict or None,
           "adjudicated_by": item.adjudicated_by.username if item.adjudicated_by_id else None,
           "adjudication_comment": item.adjudication_comment}
    if with_reviews:
        reviewers = item.claims.filter(state=ClaimState.REVIEWED).values("reviewer_id")
        out["reviews"] = [review_payload(r) for r in Review.objects.filter(
            episode_id=item.episode_id, reviewer_id__in=reviewers).select_related("reviewer").order_by("reviewer__username")]
    return out


def claim_payload(claim: QueueClaim | None, *, queue: ReviewQueue, reviewer) -> dict:
    mine = QueueClaim.objects.filter(item__queue=queue, reviewer=reviewer, state=ClaimState.REVIEWED).count()
    left = queue.items.filter(state=ItemState.PENDING).exclude(
        claims__reviewer=reviewer, claims__state__in=[ClaimState.REVIEWED, ClaimState.SKIPPED]).count()
    return {"queue": queue.pk, "item": claim.item_id if claim else None,
            "episode": claim.item.episode_id if claim else None,
            "held_until": claim.held_until.isoformat() if claim else None,
            "reviewed_by_you": mine, "left_for_you": left}
