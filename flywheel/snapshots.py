"""Immutable dataset snapshots: freezing a bucket's rows (idempotent: the same data frozen twice is one
snapshot), building the JSONL and Parquet files with progress, previews, and the export bundle.

A snapshot's rows are rendered for the checkpoint deployed when it was asked for (flywheel.datasets.export_target):
what they were rendered for is fixed at the freeze, kept in ``lineage["rendered_for"]`` and in the bundle's
snapshot.json, and is part of what makes two freezes the same one."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import tempfile
import zipfile
from collections import Counter
from collections.abc import Iterator

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone

from core import redaction
from core.audit import audit_record
from core.errors import ApplicationError
from core.limits import check_length
from agent.rows import RenderedFor
from flywheel import privacy
from flywheel.dataset_rows import image_path
from flywheel.datasets import bucket_episodes, bucket_steps, export_target, filter_apply, filter_clean, rows_iter
from flywheel.routing import routing_of
from flywheel.snapshot_kinds import kind_of
from flywheel.models import DatasetSnapshot, Episode, Project, SnapshotEpisode, SnapshotStatus, Step


def _source_key(kind: str, cleaned: dict, routing: dict, episode_ids: list[int], target: dict,
                within: object = None) -> str:
    """What a freeze asks for: the same key means the same rows (rendered for the same model). ``within``: what
    decides rows inside the same episodes (the kind's ``rows_within``: a freeze after such a
    change makes a new snapshot, not the old one)."""
    digest = hashlib.sha256(json.dumps([kind, cleaned, routing, target, within], sort_keys=True).encode())
    for pk in episode_ids:
        digest.update(pk.to_bytes(8, "big"))
    return digest.hexdigest()


def snapshot_create(*, project: Project, kind: str, name: str = "", filter: dict | None = None, actor=None,
                    build: bool = True) -> DatasetSnapshot:
    """Queue a snapshot of ``kind`` over the episodes ``filter`` selects; a job writes it (snapshot_build).

    Freezing the same data twice (a double click, two managers at once, a retried request) makes one snapshot:
    while one with the same kind, filter, routing and episodes is building or ready, it is returned, with
    ``duplicate = True`` set on the instance."""
    snapshot, created = _snapshot_create(project=project, kind=kind, name=name, filter=filter, actor=actor, build=build)
    snapshot.duplicate = not created
    return snapshot


@transaction.atomic
def _snapshot_create(*, project: Project, kind: str, name: str, filter: dict | None, actor,
                     build: bool) -> tuple[DatasetSnapshot, bool]:
    from flywheel import tasks as flywheel_tasks

    spec = kind_of(kind)
    check_length("snapshot_name", name or "", field="name")
    cleaned = filter_clean(project, filter)
    Project.objects.select_for_update().filter(pk=project.pk).first()  # one freeze of a project at a time
    routing = routing_of(project)
    episode_ids = list(filter_apply(bucket_episodes(project, kind, routing), project, kind, cleaned)
                       .order_by("pk").values_list("pk", flat=True))
    if not episode_ids:
        raise ApplicationError(spec.empty_message(), errors={"filter": ["Matches no rows."]})
    target = export_target(project).to_dict()
    within = spec.rows_within(Episode.objects.filter(pk__in=episode_ids), routing)
    policy = redaction.snapshot_record(project.settings)  # part of the key: a policy change makes a new snapshot
    key = _source_key(kind, cleaned, routing, episode_ids, target, [within, policy])
    same = (DatasetSnapshot.objects.filter(project=project, source_key=key)
            .exclude(status=SnapshotStatus.FAILED).order_by("-id").first())
    if same is not None:
        return same, False
    snapshot = DatasetSnapshot.objects.create(
        project=project, kind=kind, name=name or f"{kind} {timezone.now():%Y-%m-%d %H:%M}", filter=cleaned,
        routing=routing, source_key=key, created_by=actor if actor and actor.is_authenticated else None,
        lineage={"rendered_for": target, "redaction": policy})
    audit_record(actor=actor, action="snapshot.create", target=snapshot, data={"kind": kind, "filter": cleaned})
    if build:
        transaction.on_commit(lambda: flywheel_tasks.snapshot_build.delay(snapshot.pk))
    return snapshot, True


class _Progress:
    """Writes a building snapshot's progress at most twice a second, whatever the size of its episodes."""

    def __init__(self, snapshot_id: int) -> None:
        self.snapshot_id, self.last = snapshot_id, 0.0

    def __call__(self, value: float, force: bool = False) -> None:
        if force or time.monotonic() - self.last >= 0.5:
            self.last = time.monotonic()
            DatasetSnapshot.objects.filter(pk=self.snapshot_id, status=SnapshotStatus.BUILDING).update(
                progress=min(value, 0.99))


_BUILD_LOCK = 0x10_0EE  # the advisory-lock namespace of snapshot builds


@contextlib.contextmanager
def _build_lock(snapshot_id: int):
    """One builder a snapshot: a second one (a duplicated job, a cycle building a snapshot it shares with a
    manager's freeze) waits for the first, then finds it written. A dead worker's session lets go of it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s, %s)", [_BUILD_LOCK, snapshot_id])
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_BUILD_LOCK, snapshot_id])


def snapshot_build(*, snapshot_id: int) -> DatasetSnapshot:
    """Write the rows once (JSONL + Parquet), with their hash and lineage. Safe to run twice, even at once: a
    snapshot that is already ready or failed is left alone."""
    with _build_lock(snapshot_id):
        snapshot = DatasetSnapshot.objects.select_related("project").get(pk=snapshot_id)
        if snapshot.status != SnapshotStatus.BUILDING:
            return snapshot
        return _snapshot_write(snapshot)


def _snapshot_write(snapshot: DatasetSnapshot) -> DatasetSnapshot:
    snapshot_id = snapshot.pk
    project, kind = snapshot.project, snapshot.kind
    DatasetSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.BUILDING).update(
        started_at=timezone.now(), progress=0.0)
    progress = _Progress(snapshot_id)
    routing = snapshot.routing or routing_of(project)
    frozen_for = (snapshot.lineage or {}).get("rendered_for")
    try:
        target = RenderedFor.from_dict(frozen_for, f"snapshot {snapshot_id}") if frozen_for else export_target(project)
    except (ValueError, ApplicationError) as exc:
        snapshot_fail(snapshot_id=snapshot_id, error=str(getattr(exc, "message", exc)))
        return DatasetSnapshot.objects.get(pk=snapshot_id)
    episodes = filter_apply(bucket_episodes(project, kind, routing), project, kind, snapshot.filter)
    # Freeze the membership first: the rows are made from exactly these episodes, whatever changes meanwhile.
    episode_ids = list(episodes.order_by("pk").values_list("pk", flat=True))
    total = len(episode_ids) or 1
    digest = hashlib.sha256()
    lineage_rows = []
    by_task, by_checkpoint = Counter(), Counter()
    n_rows = 0
    try:
        with tempfile.TemporaryDirectory(prefix="loupe-snapshot-") as tmp:
            jsonl_path = os.path.join(tmp, "data.jsonl")
            parquet_path = os.path.join(tmp, "data.parquet")
            parquet = ParquetRows(parquet_path)
            with open(jsonl_path, "wb") as out:
                for done, (episode, rows) in enumerate(rows_iter(kind, episode_ids, target=target), 1):
                    rows = redaction.rows_redact(rows, snapshot.lineage, project.settings)
                    for row in rows:
                        line = (json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n").encode()
                        out.write(line)
                        digest.update(line)
                        parquet.add(row)
                    if rows:
                        n_rows += len(rows)
                        lineage_rows.append(SnapshotEpisode(snapshot_id=snapshot_id, episode_id=episode.pk, rows=len(rows)))
                        by_task[episode.task.task_name] += len(rows)
                        by_checkpoint[episode.checkpoint.name if episode.checkpoint_id else "(none)"] += len(rows)
                    progress(0.95 * done / total)
            if n_rows == 0:
                raise ApplicationError(_no_rows(kind))
            parquet.close()
            progress(0.97, force=True)
            base = f"snapshots/{project.pk}/{snapshot_id}-{kind}"
            with open(jsonl_path, "rb") as fh:
                file_name = default_storage.save(f"{base}.jsonl", File(fh))
            with open(parquet_path, "rb") as fh:
                parquet_name = default_storage.save(f"{base}.parquet", File(fh))
            size = os.path.getsize(jsonl_path)
    except ApplicationError as exc:
        DatasetSnapshot.objects.filter(pk=snapshot_id).update(status=SnapshotStatus.FAILED, error=exc.message,
                                                              finished_at=timezone.now())
        return DatasetSnapshot.objects.get(pk=snapshot_id)
    with transaction.atomic():
        SnapshotEpisode.objects.bulk_create(lineage_rows, batch_size=2000, ignore_conflicts=True)
        DatasetSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.BUILDING).update(
            status=SnapshotStatus.READY, progress=1.0, rows=n_rows, episodes=len(lineage_rows), size_bytes=size,
            sha256=digest.hexdigest(), file=file_name, parquet_file=parquet_name, finished_at=timezone.now(),
            lineage={"episodes": len(lineage_rows), "rows": n_rows, "tasks": dict(by_task),
                     "checkpoints": dict(by_checkpoint), "rendered_for": target.to_dict(),
                     "redaction": (snapshot.lineage or {}).get("redaction")})
    return DatasetSnapshot.objects.get(pk=snapshot_id)


def snapshot_fail(*, snapshot_id: int, error: str) -> None:
    DatasetSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.BUILDING).update(
        status=SnapshotStatus.FAILED, error=error[:2000], finished_at=timezone.now())


class ParquetRows:
    """Parquet beside the JSONL, written in row groups as the rows are made (no second pass over the file).
    ``meta`` (free-form) is kept as a JSON string so every row group has one schema, the first group's."""

    def __init__(self, path: str, batch: int = 5000) -> None:
        self.path, self.batch = path, batch
        self.rows: list[dict] = []
        self.writer = None
        self.schema = None

    def add(self, row: dict) -> None:
        self.rows.append({**row, "meta": json.dumps(row.get("meta", {}), sort_keys=True)})
        if len(self.rows) >= self.batch:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        if self.writer is None:
            self.schema = table.schema
            self.writer = pq.ParquetWriter(self.path, self.schema)
        self.writer.write_table(table)
        self.rows = []

    def close(self) -> None:
        if self.rows or self.writer is None:
            self._flush()
        self.writer.close()


def snapshot_preview(snapshot: DatasetSnapshot, limit: int) -> list[dict]:
    if snapshot.status != SnapshotStatus.READY:
        raise ApplicationError("This snapshot is not ready yet.", status=409)
    out = []
    with default_storage.open(snapshot.file, "rb") as fh:
        for line in fh:
            out.append(json.loads(line))
            if len(out) >= limit:
                break
    return out


# --- export ----------------------------------------------------------------------------------------
class _Sink:
    """A write-only file for zipfile that hands out what was written, so a zip streams as it is made."""

    def __init__(self):
        self._parts: list[bytes] = []

    def write(self, data) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def screenshot_names(snapshot: DatasetSnapshot) -> Iterator[str]:
    """Distinct screenshot files behind the rows, in name order (constant memory). Rows rendered for a checkpoint
    that reads screenshots also show earlier steps' (history_images), which may be steps that make no row of
    this kind (a void turn, a step the person approved): every step of the snapshot's episodes then."""
    episodes = Episode.objects.filter(pk__in=SnapshotEpisode.objects.filter(snapshot=snapshot).values("episode_id"))
    history = ((snapshot.lineage or {}).get("rendered_for") or {}).get("history_images")
    steps = Step.objects.filter(episode__in=episodes) if history else bucket_steps(snapshot.kind, episodes)
    steps = steps.exclude(screenshot="")
    yield from steps.order_by("screenshot").values_list("screenshot", flat=True).distinct().iterator(chunk_size=2000)


def snapshot_card(snapshot: DatasetSnapshot) -> dict:
    return {"id": snapshot.pk, "project": snapshot.project_id, "kind": snapshot.kind, "name": snapshot.name,
            "filter": snapshot.filter, "routing": snapshot.routing, "rows": snapshot.rows, "episodes": snapshot.episodes,
            "sha256": snapshot.sha256, "size_bytes": snapshot.size_bytes, "lineage": snapshot.lineage,
            "rendered_for": (snapshot.lineage or {}).get("rendered_for"),
            "created_at": snapshot.created_at.isoformat() if snapshot.created_at else None,
            "files": {"jsonl": "data.jsonl", "parquet": "data.parquet", "images": "images/",
                      "lineage": "lineage.jsonl"}}


def export_stream(snapshot: DatasetSnapshot, block: int = 1 << 20, originals: bool = False) -> Iterator[bytes]:
    """The export bundle as a zip, produced piece by piece: data.jsonl, data.parquet, lineage.jsonl,
    snapshot.json and every screenshot under images/. Memory stays at one block whatever the size (a screenshot at a
    time). ``originals``: also what the project kept of its steps before redaction, under originals/ (an admin's
    unredacted export, flywheel/privacy.py)."""
    if snapshot.status != SnapshotStatus.READY:
        raise ApplicationError("This snapshot is not ready yet; wait until its status is ready.", status=409)
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as bundle:
        def copy(storage_name: str, arcname: str, compress: bool = True) -> Iterator[bytes]:
            info = zipfile.ZipInfo(arcname, date_time=snapshot.created_at.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            with default_storage.open(storage_name, "rb") as src, bundle.open(info, "w", force_zip64=True) as dst:
                for piece in iter(lambda: src.read(block), b""):
                    dst.write(piece)
                    yield sink.take()
            yield sink.take()

        yield from copy(snapshot.file, "data.jsonl")
        if snapshot.parquet_file:
            yield from copy(snapshot.parquet_file, "data.parquet", compress=False)
        bundle.writestr("snapshot.json", json.dumps(snapshot_card(snapshot), indent=2))
        with bundle.open("lineage.jsonl", "w") as dst:
            members = SnapshotEpisode.objects.filter(snapshot=snapshot).order_by("episode_id")
            for member in members.values("episode_id", "rows").iterator(chunk_size=5000):
                dst.write((json.dumps(member) + "\n").encode())
        yield sink.take()
        for name in screenshot_names(snapshot):
            if default_storage.exists(name):
                shown = Step.objects.filter(screenshot=name, episode_id__in=snapshot.members.values("episode_id"))
                yield from copy(redaction.screenshot_redacted(name, snapshot.lineage, snapshot.project.settings,
                                                              shown.values_list("elements", flat=True)),
                                image_path(name), compress=False)
        for arcname, data in privacy.snapshot_originals(snapshot) if originals else ():
            bundle.writestr(arcname, data)
            yield sink.take()
    yield sink.take()

