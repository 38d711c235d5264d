"""Which episodes a person may see, and reading them: filters, orderings, neighbours in a list, the queue position
of a waiting episode."""
from __future__ import annotations

import datetime as dt

from django.db.models import Q, QuerySet

from core.errors import ApplicationError
from projects.models import Role, Split
from projects.selectors import project_role, role_at_least
from rollouts.models import Episode, EpisodeStatus, Mode, Outcome, ReviewStatus

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def episodes_for_user(*, user) -> QuerySet[Episode]:
    episodes = Episode.objects.select_related("task", "checkpoint", "created_by")
    if user.is_staff:
        return episodes
    return episodes.filter(project__memberships__user=user)


def episode_for_user(*, user, episode_id: int, minimum: str = Role.ANNOTATOR) -> tuple[Episode, str]:
    episode = Episode.objects.select_related("task", "checkpoint", "created_by", "project").filter(pk=episode_id).first()
    role = project_role(user=user, project=episode.project_id) if episode else None
    if episode is None or role is None:
        raise ApplicationError("No such episode, or you are not a member of its project.", status=404)
    if not role_at_least(role, minimum):
        raise ApplicationError(f"This needs the {minimum} role; you are {role}.", status=403)
    return episode, role


EPISODE_ORDERINGS = ("-id", "id", "-n_steps", "n_steps", "-n_interventions")


def episodes_filter(episodes: QuerySet[Episode], params) -> QuerySet[Episode]:
    """The review list's filters, from query parameters; a bad value is refused naming the parameter."""
    def bad(name: str, message: str):
        raise ApplicationError(f"'{name}': {message}", errors={name: [message]})

    def number(name: str, kind=int):
        try:
            return kind(params[name])
        except (TypeError, ValueError):
            bad(name, f"expected a number, got '{params[name]}'.")

    def choice(name: str, values) -> str:
        if params[name] not in values:
            bad(name, f"'{params[name]}' is not one of {', '.join(v for v in values if v)}.")
        return params[name]

    def flag(name: str) -> bool:
        value = params[name].lower()
        if value not in _TRUE + _FALSE:
            bad(name, "expected true or false.")
        return value in _TRUE

    def date(name: str) -> dt.date:
        try:
            return dt.date.fromisoformat(params[name])
        except ValueError:
            bad(name, f"expected a date like 2026-12-31, got '{params[name]}'.")

    given = {k for k, v in params.items() if v not in ("", None)}
    if "task" in given:
        episodes = episodes.filter(task_id=number("task"))
    if "checkpoint" in given:
        episodes = episodes.filter(checkpoint_id=number("checkpoint"))
    if "rl_run" in given:  # the episodes an RL run played through the environment service
        episodes = episodes.filter(rl_run=params["rl_run"])
    if "annotator" in given:
        episodes = episodes.filter(created_by_id=number("annotator"))
    if "split" in given:
        episodes = episodes.filter(task__split=choice("split", Split.values))
    if "mode" in given:
        episodes = episodes.filter(mode=choice("mode", Mode.values))
    if "status" in given:
        episodes = episodes.filter(status=choice("status", EpisodeStatus.values))
    if "outcome" in given:
        episodes = episodes.filter(outcome=choice("outcome", [v for v in Outcome.values if v]))
    if "review_status" in given:
        episodes = episodes.filter(review_status=choice("review_status", ReviewStatus.values))
    if "reward_min" in given:
        episodes = episodes.filter(env_reward__gte=number("reward_min", float))
    if "reward_max" in given:
        episodes = episodes.filter(env_reward__lte=number("reward_max", float))
    if "has_interventions" in given:
        episodes = episodes.filter(n_interventions__gt=0) if flag("has_interventions") else episodes.filter(n_interventions=0)
    if "has_void" in given:
        episodes = episodes.filter(n_void__gt=0) if flag("has_void") else episodes.filter(n_void=0)
    if "disagreement" in given:  # a person's outcome the task's check contradicts (Episode.review_reason)
        episodes = episodes.exclude(review_reason="") if flag("disagreement") else episodes.filter(review_reason="")
    if "created_after" in given:
        episodes = episodes.filter(created_at__date__gte=date("created_after"))
    if "created_before" in given:
        episodes = episodes.filter(created_at__date__lte=date("created_before"))
    if "ordering" in given:
        choice("ordering", EPISODE_ORDERINGS)
    return episodes


def episode_neighbours(episodes: QuerySet[Episode], *, episode: Episode, ordering: str = "-id") -> dict:
    """The episodes just before and after ``episode`` in ``episodes`` as the review list orders them
    (``ordering``, then newest id first): the replay's previous / next. ``episode`` itself need not
    match the filters any more (reviewing it may have taken it out of an "unreviewed" view)."""
    if ordering not in EPISODE_ORDERINGS:
        raise ApplicationError(f"'ordering': '{ordering}' is not one of {', '.join(EPISODE_ORDERINGS)}.",
                               errors={"ordering": ["Invalid choice."]})
    field = ordering.lstrip("-")
    descending = ordering.startswith("-")
    if field == "id":
        after, before = (Q(id__lt=episode.pk), Q(id__gt=episode.pk)) if descending else \
            (Q(id__gt=episode.pk), Q(id__lt=episode.pk))
        forward, backward = [ordering], [field if descending else f"-{field}"]
    else:
        value = getattr(episode, field)
        later, earlier = ("lt", "gt") if descending else ("gt", "lt")
        # Ties on the sort field are broken by newest id first, as the list pages them.
        after = Q(**{f"{field}__{later}": value}) | Q(**{field: value}, id__lt=episode.pk)
        before = Q(**{f"{field}__{earlier}": value}) | Q(**{field: value}, id__gt=episode.pk)
        forward, backward = [ordering, "-id"], [field if descending else f"-{field}", "id"]
    ids = episodes.values_list("id", flat=True)
    return {"previous": ids.filter(before).order_by(*backward).first(),
            "next": ids.filter(after).order_by(*forward).first()}


def episode_queue_position(episode: Episode) -> dict | None:
    """Where a queued episode stands in its lane: how many queued episodes of the same lane (supervised:
    people's lane; autonomous: the machines') were queued before it, and how many of the lane run now.
    None when it is not waiting."""
    if episode.status != EpisodeStatus.QUEUED:
        return None
    lane = Episode.objects.filter(mode=episode.mode)
    return {"lane": "people" if episode.mode == Mode.SUPERVISED else "machines",
            "ahead": lane.filter(status=EpisodeStatus.QUEUED, pk__lt=episode.pk).count(),
            "running": lane.filter(status__in=[EpisodeStatus.RUNNING, EpisodeStatus.PAUSED]).count()}
