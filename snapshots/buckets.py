"""Datasets: what a project's rows are rendered for (:func:`export_target`), its buckets (one a snapshot kind,
snapshots/snapshot_kinds.py), the filters a snapshot is asked with, and the rows of a bucket's episodes
(snapshots/rows.py renders them; snapshots.py freezes them).

The routing that decides the sft and ct buckets is rollouts/routing.py (its setter is named here too, where the
callers have always found it)."""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

from django.db.models import QuerySet
from django.db.models.base import ModelState

from agent import formats
from agent.prompt import DEFAULT_STYLE
from agent.rows import RenderedFor
from core.errors import ApplicationError
from projects.models import Project, Split
from rollouts.history import history_images_of
from rollouts.models import CorrectionReplay, Deployment, Episode, EpisodeStatus, Mode, Rejection, Step
from rollouts.routing import RULES, routing_of, routing_set  # noqa: F401 named as datasets.* by callers
from snapshots.models import SnapshotEpisode, SnapshotStatus
from snapshots.snapshot_kinds import KINDS, kind_of

FILTER_KEYS = {"tasks", "split", "checkpoint", "mode", "created_after", "created_before", "only_new"}


# --- what rows are rendered for ---
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
# trains the tiny model (training.runs.run_create), so that is what the rows are rendered for then.
TINY_STYLE = "named"


def export_target(project: Project) -> RenderedFor:
    """What the project's rows are rendered for: the checkpoint its next training run starts from (as
    training.runs.run_create picks it: the deployed one when its dir exists, else the tiny model). Its action
    format, prompt style (its loupe.json's), whether it reads screenshots, and then the project's
    ``history_images``. The tiny model: format loupe, the named prompt, no screenshots."""
    deployment = Deployment.objects.filter(project=project, active=True).select_related("checkpoint").first()
    checkpoint = deployment.checkpoint if deployment is not None else None
    if checkpoint is None or not checkpoint.uri or not Path(checkpoint.uri).is_dir():
        return RenderedFor(style=TINY_STYLE)
    history = history_images_of(project) if checkpoint.reads_images else 0
    # a format on the resized image is written on the grid its processor shows it, as its answers are read
    pixels = formats.pixel_limits(checkpoint.uri) if formats.resizes(checkpoint.action_format) else {}
    try:
        return RenderedFor(style=_checkpoint_style(checkpoint.uri), action_format=checkpoint.action_format,
                           reads_images=checkpoint.reads_images, history_images=history, **pixels)
    except ValueError as exc:
        raise ApplicationError(f"Checkpoint {checkpoint.name} cannot have rows rendered for it: {exc}.") from None


# --- buckets ---------------------------------------------------------------------------------------
def bucket_episodes(project: Project, kind: str, routing: dict | None = None) -> QuerySet[Episode]:
    """The episodes whose rows belong to bucket ``kind``."""
    spec = kind_of(kind)
    finished = Episode.objects.filter(project=project, status=EpisodeStatus.FINISHED)
    return spec.episodes(finished, routing or routing_of(project))


def bucket_steps(kind: str, episodes: QuerySet[Episode]) -> QuerySet[Step]:
    """The steps that make rows of ``kind`` (RL rows are whole episodes)."""
    return kind_of(kind).steps(episodes)


def row_count(kind: str, episodes: QuerySet[Episode], target: RenderedFor | None = None) -> int:
    """How many rows bucket ``kind`` makes of ``episodes`` rendered for ``target`` (None: a text target)."""
    return kind_of(kind).row_count(episodes, target)


def _frozen(project: Project, kind: str) -> QuerySet:
    """The episodes a ready snapshot of ``kind`` already holds."""
    return SnapshotEpisode.objects.filter(snapshot__project=project, snapshot__kind=kind,
                                          snapshot__status=SnapshotStatus.READY).values("episode_id")


def buckets(project: Project) -> dict:
    """Rows, episodes and rows new since the last snapshot of each kind, and of each kind's named parts (``rft``:
    the part of ``sft`` that autonomous successes make, rejection-sampled fine-tuning rows frozen with SFT)."""
    routing = routing_of(project)
    target = export_target(project)
    out = {}
    for kind, spec in KINDS.items():
        episodes = bucket_episodes(project, kind, routing)
        frozen = _frozen(project, kind)
        out[kind] = {"rows": row_count(kind, episodes, target), "episodes": episodes.count(),
                     "new_rows": row_count(kind, episodes.exclude(pk__in=frozen), target)}
        for name, part in spec.sub_buckets(episodes).items():
            out[name] = {"rows": row_count(kind, part), "episodes": part.count(),
                         "new_rows": row_count(kind, part.exclude(pk__in=frozen))}
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
        episodes = episodes.exclude(pk__in=_frozen(project, kind))
    return episodes


# --- rows -------------------------------------------------------------------------------------------
def episode_rows(kind: str, episode: Episode, steps: list[Step], target: RenderedFor | None = None) -> list[dict]:
    """The rows ``kind`` makes of one episode (``steps`` ordered by index), rendered for ``target`` (agent.rows)
    from the steps' structure: the prompt each step was (or would have been) sent, the executed turn in the
    target's format. ApplicationError names a step that cannot be written in that format."""
    return kind_of(kind).episode_rows(episode, steps, target or RenderedFor())


def rows_iter(kind: str, episode_ids: Sequence[int], chunk: int = 200,
              target: RenderedFor | None = None) -> Iterator[tuple[Episode, list[dict]]]:
    """(episode, its rows rendered for ``target``) for each of ``episode_ids`` (a snapshot's frozen membership, in
    id order) that still exists, reading ``chunk`` episodes at a time. Each batch asks for its own ids only: a
    query that filtered the whole membership (``pk__in`` all of it) for each batch grew with the snapshot, squared."""
    base = Episode.objects.select_related("task", "checkpoint").order_by("pk")
    # Rows are rendered from the steps' structure: the prompt as it was sent (the largest column) is never read, nor
    # are the tokens and log-probs outside RL rows, so they are not fetched (decoding them is a large part of a
    # build), nor are the timestamps (README, Sizing).
    unread = ("prompt", "timings", "polish_source", "polish_error", "started_at", "created_at", "polished_at") + (
        () if kind_of(kind).reads_tokens else ("token_ids", "token_logprobs"))
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
    deferred field is), each with its rejections in attempt order as ``rejections_in_order`` (dataset_rows.step_rejections).

    They are real Step instances made from ``values_list`` rows: Django's own instantiation, one setattr per field
    with its checks, is most of a snapshot's fetch (README, Sizing); the values are the same converted values the ORM
    sets."""
    names = [field.attname for field in Step._meta.concrete_fields if field.attname not in unread]
    rows = Step.objects.filter(episode_id__in=episode_ids).order_by("episode_id", "index").values_list(*names)
    steps, by_id, db = [], {}, rows.db
    for row in rows.iterator(chunk_size=2000):
        step = Step.__new__(Step)
        step.__dict__.update(zip(names, row))
        step._state = ModelState()
        step._state.adding, step._state.db = False, db
        step.rejections_in_order = []
        step.replays_in_order = []  # rollouts.steps.step_learned reads them
        steps.append(step)
        by_id[step.pk] = step
    for rejection in Rejection.objects.filter(step__episode_id__in=episode_ids).order_by("step_id", "attempt"):
        by_id[rejection.step_id].rejections_in_order.append(rejection)
    for replay in CorrectionReplay.objects.filter(step__episode_id__in=episode_ids).order_by("step_id", "cycle_id"):
        by_id[replay.step_id].replays_in_order.append(replay)
    return steps
