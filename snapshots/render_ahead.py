"""Rows rendered ahead of a freeze (issue 38: snapshot builds at scale). A freeze concatenates what is stored
(snapshots/stored_rows.py, about 35,000 rows a second) and renders only the episodes that have nothing stored (about
3,000 rows a second): rendered here, soon after each episode finishes and by a sweep that catches up on what changed
since, the rows a freeze needs are mostly stored before anyone asks for it, and the freeze of a large project takes
seconds instead of minutes. The rendering is the one a freeze would do now: the project's export target (its
deployed checkpoint's format and prompt style) and its redaction policy, for the kinds LOUPE_RENDER_AHEAD_KINDS names.
A change of either, or of the rendering code, makes another key: the sweep renders again, and until then a freeze
renders what it lacks, as before. Nothing here decides what a snapshot holds."""
from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, OuterRef

from core.errors import ApplicationError
from core.jobs import job
from projects.models import Project
from rollouts.models import Episode, EpisodeStatus
from snapshots.buckets import bucket_episodes, export_target
from snapshots.models import RenderedRows, SnapshotKind
from snapshots.stored_rows import episodes_rendered, rendering_key

log = logging.getLogger("loupe.snapshots")

CHUNK = 200  # episodes read, rendered and stored at a time


def kinds() -> list[str]:
    return [kind.strip() for kind in settings.LOUPE_RENDER_AHEAD_KINDS.split(",") if kind.strip()]


def unrendered(project: Project, kind: str, key: str):
    """The project's episodes of bucket ``kind`` with no rows stored under ``key`` (a change drops an episode's
    stored rows: database triggers), oldest first. A DPO branch's rows are its pair with its parent, rendered at
    every freeze and never stored: not listed."""
    stored = RenderedRows.objects.filter(episode_id=OuterRef("pk"), kind=kind, key=key)
    episodes = bucket_episodes(project, kind).filter(~Exists(stored))
    if kind == SnapshotKind.DPO:
        episodes = episodes.filter(parent__isnull=True)
    return episodes.order_by("pk")


def render_ahead(project_id: int, *, seconds: float | None = None) -> dict[str, int]:
    """Render and store the rows a freeze of the project would render now, for each kind, until none is left or
    ``seconds`` (LOUPE_RENDER_AHEAD_SECONDS) have passed. Returns the episodes rendered per kind. A project whose
    deployed checkpoint cannot have rows rendered for it (a freeze would say why) renders nothing."""
    budget = settings.LOUPE_RENDER_AHEAD_SECONDS if seconds is None else seconds
    started = time.monotonic()
    project = Project.objects.filter(pk=project_id).first()
    done: dict[str, int] = {}
    if project is None:
        return done
    try:
        target = export_target(project)
    except ApplicationError as exc:
        log.info("render ahead: project %s: %s", project_id, exc.message)
        return done
    for kind in kinds():
        key = rendering_key(kind, target, project.settings)
        # built once a kind: the DPO bucket lists its branch pairs in Python as the queryset is made
        pending = unrendered(project, kind, key)
        done[kind], last = 0, 0
        while time.monotonic() - started < budget:
            # onwards from the last chunk: each episode once a job, one that cannot be rendered left behind
            ids = list(pending.filter(pk__gt=last).values_list("pk", flat=True)[:CHUNK])
            if not ids:
                break
            last = ids[-1]
            done[kind] += _chunk_render(project, kind, ids, target)
    return done


def _chunk_render(project: Project, kind: str, ids: list[int], target) -> int:
    """How many of ``ids`` were rendered and stored. An episode the renderer fails on is logged and left to the
    freeze, which says why; the others of its chunk are rendered one by one."""
    def run(chunk: list[int]) -> int:
        return sum(1 for _ in episodes_rendered(kind, chunk, target, None, project.settings, chunk=CHUNK))

    try:
        return run(ids)
    except Exception:  # noqa: BLE001 - one episode's records: find it, render the rest
        made = 0
        for pk in ids:
            try:
                made += run([pk])
            except Exception as exc:  # noqa: BLE001
                log.warning("render ahead: episode %s (%s rows) cannot be rendered: %r", pk, kind, exc)
        return made


def render_ahead_sweep() -> dict[int, dict[str, int]]:
    """Every project with finished episodes, in turn: the beat's catch-up (what changed since it was rendered)."""
    projects = Project.objects.filter(Exists(Episode.objects.filter(project=OuterRef("pk"),
                                                                    status=EpisodeStatus.FINISHED)))
    return {project_id: render_ahead(project_id) for project_id in projects.order_by("pk").values_list("pk", flat=True)}


def on_episode_finished(sender, *, episode: Episode, **_) -> None:
    """Queue the project's rendering a little after an episode finishes (LOUPE_RENDER_AHEAD_DELAY: its judgement,
    transcripts and thoughts' polish land first), once per project per delay. Never in the way of the finish: with
    Redis away the beat's sweep renders it later."""
    if episode.status != EpisodeStatus.FINISHED or not kinds():
        return
    project_id, delay = episode.project_id, settings.LOUPE_RENDER_AHEAD_DELAY

    def queue() -> None:
        try:
            if cache.add(f"render-ahead:{project_id}", 1, timeout=max(1, int(delay))):
                job("snapshots.tasks.render_ahead").apply_async((project_id,), countdown=delay)
        except Exception as exc:  # noqa: BLE001 - Redis down: the sweep catches up
            log.warning("render ahead: could not queue project %s (%s); the sweep will", project_id, exc)

    transaction.on_commit(queue)
