"""Immutable dataset snapshots: freezing a bucket's rows (idempotent: the same data frozen twice is one
snapshot), building the JSONL and Parquet files with progress, previews, and the export bundle.

A snapshot's rows are rendered for the checkpoint deployed when it was asked for (snapshots.buckets.export_target):
what they were rendered for is fixed at the freeze, kept in ``lineage["rendered_for"]`` and in the bundle's
snapshot.json, and is part of what makes two freezes the same one."""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import mmap
import os
import pickle
import signal
import struct
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings as django_settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import connection, connections, transaction
from django.utils import timezone

from agent.rows import RenderedFor
from core import redaction
from core.audit import audit_record
from core.errors import ApplicationError
from core.jobs import job
from core.limits import check_length
from projects.models import Project
from rollouts.models import Episode
from rollouts.routing import routing_of
from snapshots.buckets import bucket_episodes, export_target, filter_apply, filter_clean, rows_iter
from snapshots.export import ParquetRows
from snapshots.models import DatasetSnapshot, SnapshotEpisode, SnapshotStatus
from snapshots.snapshot_kinds import kind_of
from snapshots.stored_rows import episodes_rendered


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
        transaction.on_commit(lambda: job("flywheel.tasks.snapshot_build").delay(snapshot.pk))
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


def snapshot_build(*, snapshot_id: int, processes: int | None = None, stored: bool = True) -> DatasetSnapshot:
    """Write the rows once (JSONL + Parquet), with their hash and lineage. Safe to run twice, even at once: a
    snapshot that is already ready or failed is left alone. ``processes``: how many to split the build over
    (LOUPE_SNAPSHOT_PROCESSES, a process for each 1,000 episodes at most, when not given); the files and hash
    are the same whatever the number. ``stored``: read the episodes' rows rendered before and store those rendered
    now (snapshots/stored_rows.py; the files are the same); False renders every episode and stores nothing."""
    with _build_lock(snapshot_id):
        snapshot = DatasetSnapshot.objects.select_related("project").get(pk=snapshot_id)
        if snapshot.status != SnapshotStatus.BUILDING:
            return snapshot
        return _snapshot_write(snapshot, processes, stored)


def _snapshot_write(snapshot: DatasetSnapshot, processes: int | None = None, stored: bool = True) -> DatasetSnapshot:
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
    ranges = _ranges(episode_ids, _processes(len(episode_ids), processes))
    try:
        with tempfile.TemporaryDirectory(prefix="loupe-snapshot-") as tmp:
            jobs = [_PartJob(snapshot=snapshot, target=target, episode_ids=ids, jsonl=os.path.join(tmp, f"part-{i}.jsonl"),
                             parquet=os.path.join(tmp, f"part-{i}.parquet"), stored=stored)
                    for i, ids in enumerate(ranges)]
            parts = _parts_run(jobs, lambda done: progress(0.9 * done / (len(episode_ids) or 1)))
            n_rows = sum(part.rows for part in parts)
            if n_rows == 0:
                raise ApplicationError(kind_of(kind).empty_message())
            progress(0.92, force=True)
            jsonl_path, parquet_path = os.path.join(tmp, "data.jsonl"), os.path.join(tmp, "data.parquet")
            digest = _jsonl_merge([part.jsonl for part in parts], jsonl_path)
            _parquet_merge([part.parquet for part in parts if part.rows], parquet_path)
            progress(0.97, force=True)
            base = f"snapshots/{project.pk}/{snapshot_id}-{kind}"
            size = os.path.getsize(jsonl_path)
            with open(jsonl_path, "rb") as fh:
                file_name = default_storage.save(f"{base}.jsonl", _Made(fh))
            with open(parquet_path, "rb") as fh:
                parquet_name = default_storage.save(f"{base}.parquet", _Made(fh))
    except ApplicationError as exc:
        DatasetSnapshot.objects.filter(pk=snapshot_id).update(status=SnapshotStatus.FAILED, error=exc.message,
                                                              finished_at=timezone.now())
        return DatasetSnapshot.objects.get(pk=snapshot_id)
    members = [member for part in parts for member in part.members]
    by_task, by_checkpoint = Counter(), Counter()
    for part in parts:
        by_task.update(part.tasks)
        by_checkpoint.update(part.checkpoints)
    with transaction.atomic():
        _members_record(snapshot_id, members)
        DatasetSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.BUILDING).update(
            status=SnapshotStatus.READY, progress=1.0, rows=n_rows, episodes=len(members), size_bytes=size,
            sha256=digest, file=file_name, parquet_file=parquet_name, finished_at=timezone.now(),
            lineage={"episodes": len(members), "rows": n_rows, "tasks": dict(by_task),
                     "checkpoints": dict(by_checkpoint), "rendered_for": target.to_dict(),
                     "redaction": (snapshot.lineage or {}).get("redaction")})
    return DatasetSnapshot.objects.get(pk=snapshot_id)


class _Made(File):
    """A file the build made on local disk: a storage on the same disk (FileSystemStorage) moves it into place
    instead of copying it (Django's rule for an upload's temporary file); any other storage reads it."""

    def temporary_file_path(self) -> str:
        return self.file.name


def _members_record(snapshot_id: int, members: list[tuple[int, int]]) -> None:
    """The snapshot's SnapshotEpisode rows, (episode id, rows) each, in one statement a 10,000 (no model instance
    each)."""
    table = SnapshotEpisode._meta.db_table
    with connection.cursor() as cursor:
        for start in range(0, len(members), 10_000):
            batch = members[start:start + 10_000]
            cursor.execute(f"INSERT INTO {table} (snapshot_id, episode_id, rows) SELECT %s, e, r "
                           "FROM unnest(%s::bigint[], %s::int[]) AS m(e, r) ON CONFLICT DO NOTHING",
                           [snapshot_id, [e for e, _ in batch], [r for _, r in batch]])


# --- a build in parts --------------------------------------------------------------------------------
# A build is split by episode ranges over processes (os.fork: a Celery pool process may not start
# multiprocessing's children), each writing its own JSONL and Parquet part; the parts are joined in episode
# order, so the file, and the sha256 of its bytes, are the same whatever the number of processes.
MIN_EPISODES_A_PROCESS = 1000  # below that, a process's start and connection cost more than it saves


def _processes(episodes: int, asked: int | None) -> int:
    if connection.in_atomic_block:
        return 1  # another process would not see what this transaction wrote
    if asked:
        return max(1, min(asked, episodes))
    return max(1, min(django_settings.LOUPE_SNAPSHOT_PROCESSES, episodes // MIN_EPISODES_A_PROCESS))


def _ranges(episode_ids: list[int], n: int) -> list[list[int]]:
    """``episode_ids`` in ``n`` consecutive ranges of (nearly) equal length."""
    size, extra = divmod(len(episode_ids), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(episode_ids[start:end])
        start = end
    return out


@dataclass
class _PartJob:
    snapshot: DatasetSnapshot
    target: RenderedFor
    episode_ids: list[int]
    jsonl: str
    parquet: str
    stored: bool = True  # read and store the episodes' rendered rows (snapshots/stored_rows.py)


@dataclass
class _Part:
    """What one part made: its files, its row count, (episode id, rows) of each episode that made rows."""
    jsonl: str
    parquet: str
    rows: int = 0
    members: list[tuple[int, int]] = field(default_factory=list)
    tasks: Counter = field(default_factory=Counter)
    checkpoints: Counter = field(default_factory=Counter)


def _part_write(job: _PartJob, on_episode: Callable[[int], None]) -> _Part:
    if not job.stored:
        return _part_render(job, on_episode)
    snapshot = job.snapshot
    part = _Part(jsonl=job.jsonl, parquet=job.parquet)
    parquet = ParquetRows(job.parquet)
    episodes = episodes_rendered(snapshot.kind, job.episode_ids, job.target, snapshot.lineage,
                                 snapshot.project.settings)
    with open(job.jsonl, "wb") as out:
        for done, episode in enumerate(episodes, 1):
            if episode.rows:
                out.write(episode.jsonl)
                parquet.add_lines(episode.parquet)
                part.rows += episode.rows
                part.members.append((episode.episode_id, episode.rows))
                part.tasks[episode.task] += episode.rows
                part.checkpoints[episode.checkpoint] += episode.rows
            on_episode(done)
    if part.rows:
        parquet.close()
    return part


def _part_render(job: _PartJob, on_episode: Callable[[int], None]) -> _Part:
    """A part with every episode's rows rendered now, nothing read or stored: what a build from stored rows must
    equal byte for byte (tests/snapshots/test_stored_rows.py)."""
    snapshot = job.snapshot
    part = _Part(jsonl=job.jsonl, parquet=job.parquet)
    parquet = ParquetRows(job.parquet)
    encode = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode
    with open(job.jsonl, "wb") as out:
        for done, (episode, rows) in enumerate(rows_iter(snapshot.kind, job.episode_ids, target=job.target), 1):
            rows = redaction.rows_redact(rows, snapshot.lineage, snapshot.project.settings)
            if rows:
                out.write("".join(encode(row) + "\n" for row in rows).encode())
                for row in rows:
                    parquet.add(row)
                part.rows += len(rows)
                part.members.append((episode.pk, len(rows)))
                part.tasks[episode.task.task_name] += len(rows)
                part.checkpoints[episode.checkpoint.name if episode.checkpoint_id else "(none)"] += len(rows)
            on_episode(done)
    if part.rows:
        parquet.close()
    return part


def _parts_run(jobs: list[_PartJob], on_progress: Callable[[int], None]) -> list[_Part]:
    """Each job's part, in job order: in this process when there is one, else a forked process each, whose
    episodes done are read from shared memory for the progress."""
    if len(jobs) == 1:
        return [_part_write(jobs[0], on_progress)]
    # Arrow imported once here, not once in each child (most of a second of CPU each; its first conversion imports
    # pandas).
    import pyarrow
    import pyarrow.json  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    pyarrow.Table.from_pylist([{"warm": 0}])

    counts = mmap.mmap(-1, 8 * len(jobs))  # anonymous and shared with the children
    builder = os.getpid()
    children: dict[int, int] = {}
    try:
        for slot, job in enumerate(jobs):
            pid = os.fork()
            if pid == 0:
                _part_child(job, slot, counts, builder)  # never returns
            children[pid] = slot
        failed = None
        while children and failed is None:
            for pid, slot in list(children.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    del children[pid]
                    if os.waitstatus_to_exitcode(status) != 0:
                        failed = slot
            on_progress(sum(struct.unpack_from(f"{len(jobs)}q", counts)))
            if children and failed is None:
                time.sleep(0.2)
        if failed is not None:
            outcome = _part_outcome(jobs[failed])
            if outcome is None:
                raise ApplicationError("A snapshot build process ended unexpectedly (out of memory?); build it again.")
            if outcome[0] == "refused":
                raise ApplicationError(outcome[1])
            raise RuntimeError(f"snapshot build part {failed} failed:\n{outcome[1]}")
        return [_part_outcome(job)[1] for job in jobs]
    finally:
        for pid in children:  # a failed part ends the build: its siblings' work is no use
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        counts.close()


_INHERITED: list = []  # the parent's database connections, kept from the garbage collector in a child


_PR_SET_PDEATHSIG = 1


def _part_child(job: _PartJob, slot: int, counts: mmap.mmap, parent: int) -> None:
    code = 1
    try:
        with contextlib.suppress(OSError, AttributeError):  # Linux: die with the builder (a killed worker)
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the builder died before the line above took effect
        for conn in connections.all(initialized_only=True):
            # The socket is the parent's: closing it here (or letting psycopg close it when collected) would end
            # the parent's session and its build lock. The child opens its own.
            _INHERITED.append(conn.connection)
            conn.connection = None
        try:
            part = _part_write(job, lambda done: struct.pack_into("q", counts, 8 * slot, done))
            outcome, code = ("ok", part), 0
        except ApplicationError as exc:
            outcome = ("refused", exc.message)
        except BaseException:  # noqa: BLE001 - told to the parent, which raises it
            outcome = ("error", traceback.format_exc())
        with open(job.jsonl + ".outcome", "wb") as fh:
            pickle.dump(outcome, fh)
        connections.close_all()
    finally:
        os._exit(code)  # never back into the parent's code (a Celery worker's loop)


def _part_outcome(job: _PartJob) -> tuple[str, object] | None:
    try:
        with open(job.jsonl + ".outcome", "rb") as fh:
            return pickle.load(fh)
    except FileNotFoundError:
        return None


def _jsonl_merge(paths: list[str], target: str) -> str:
    """The parts joined in order into ``target`` (the first part, the others appended by the kernel: no copy through
    Python); the sha256 of its bytes."""
    digest = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                digest.update(block)
    os.replace(paths[0], target)
    if len(paths) > 1:
        with open(target, "r+b") as out:  # not "ab": sendfile refuses a file opened to append
            out.seek(0, os.SEEK_END)
            for path in paths[1:]:
                with open(path, "rb") as src:
                    left = os.fstat(src.fileno()).st_size
                    while left > 0:
                        left -= os.sendfile(out.fileno(), src.fileno(), None, min(left, 1 << 30))
                os.remove(path)
    return digest.hexdigest()


def _parquet_merge(paths: list[str], target: str) -> None:
    """The parts' row groups in order into ``target``, under the first part's schema (the one a single process
    would have written: its first row group's)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if len(paths) == 1:
        os.replace(paths[0], target)
        return
    files = [pq.ParquetFile(path) for path in paths]
    schema = files[0].schema_arrow
    with pq.ParquetWriter(target, schema) as writer:
        for part in files:
            for group in range(part.num_row_groups):
                table = part.read_row_group(group)
                if not table.schema.equals(schema):
                    table = pa.table([table.column(f.name).cast(f.type) if f.name in table.column_names
                                      else pa.nulls(table.num_rows, f.type) for f in schema], schema=schema)
                writer.write_table(table)


def snapshot_fail(*, snapshot_id: int, error: str) -> None:
    DatasetSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.BUILDING).update(
        status=SnapshotStatus.FAILED, error=error[:2000], finished_at=timezone.now())


