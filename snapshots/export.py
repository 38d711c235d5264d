"""A built snapshot read back: a preview of its rows, its card, the export bundle (rows, images, card) streamed as a
zip, and for an admin the originals the project kept of its redacted steps."""
from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator

from django.core.files.storage import default_storage

from core import redaction
from core.errors import ApplicationError
from rollouts import privacy
from rollouts.models import Episode, Step
from snapshots.buckets import bucket_steps
from snapshots.models import DatasetSnapshot, SnapshotEpisode, SnapshotStatus
from snapshots.rows import image_path


class ParquetRows:
    """Parquet beside the JSONL, written in row groups as the rows are made (no second pass over the file).
    ``meta`` (free-form) is kept as a JSON string so every row group has one schema, the first group's."""

    def __init__(self, path: str, batch: int = 5000) -> None:
        self.path, self.batch = path, batch
        self.rows: list[dict] = []
        self.lines: list[bytes] = []
        self.writer = None
        self.schema = None

    def add(self, row: dict) -> None:
        self.rows.append({**row, "meta": json.dumps(row.get("meta", {}), sort_keys=True)})
        if len(self.rows) >= self.batch:
            self._flush()

    def add_lines(self, lines: bytes) -> None:
        """Rows as JSON lines of what :meth:`add` keeps of each (snapshots.stored_rows.parquet_row, in the rows' key
        order). Not mixed with :meth:`add` in one file."""
        self.lines.extend(lines.splitlines(keepends=True))
        while len(self.lines) >= self.batch:
            batch, self.lines = self.lines[:self.batch], self.lines[self.batch:]
            self._write(self._lines_table(batch))

    def _lines_table(self, lines: list[bytes]):
        """The table of ``lines``: the first group's as :meth:`add`'s rows would make it (its schema is the file's),
        later ones read by Arrow's JSON reader into that schema (the same values, without a Python object a
        value)."""
        import pyarrow as pa
        import pyarrow.json as pj

        if self.schema is not None:
            data = b"".join(lines)
            try:
                return pj.read_json(pa.py_buffer(data),
                                    read_options=pj.ReadOptions(use_threads=False, block_size=len(data) + 1),
                                    parse_options=pj.ParseOptions(explicit_schema=self.schema,
                                                                  unexpected_field_behavior="ignore"))
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass  # a value the reader refuses where from_pylist converts it (a float in an int column): as add's
        return pa.Table.from_pylist([json.loads(line) for line in lines], schema=self.schema)

    def _write(self, table) -> None:
        import pyarrow.parquet as pq

        if self.writer is None:
            self.schema = table.schema
            self.writer = pq.ParquetWriter(self.path, self.schema)
        self.writer.write_table(table)

    def _flush(self) -> None:
        import pyarrow as pa

        self._write(pa.Table.from_pylist(self.rows, schema=self.schema))
        self.rows = []

    def close(self) -> None:
        if self.lines:
            self._write(self._lines_table(self.lines))
            self.lines = []
        elif self.rows or self.writer is None:
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
    unredacted export, rollouts/privacy.py)."""
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
        for arcname, data in snapshot_originals(snapshot) if originals else ():
            bundle.writestr(arcname, data)
            yield sink.take()
    yield sink.take()


def snapshot_originals(snapshot):
    """What the project kept of its snapshot's steps as they were, for an admin's unredacted export: (name in the
    bundle, bytes) pairs, ``originals/steps.jsonl`` (one line a step: episode, step, its original fields) and
    ``originals/<episode>-<step>.jpg`` (its original screenshot). Nothing where the project keeps no originals."""
    lines = []
    members = SnapshotEpisode.objects.filter(snapshot=snapshot).order_by("episode_id")
    for episode_id in members.values_list("episode_id", flat=True).iterator(chunk_size=5000):
        base = f"{privacy.ORIGINALS}/{episode_id}"
        if not default_storage.exists(base):
            continue
        for index in sorted(int(d) for d in default_storage.listdir(base)[0] if d.isdigit()):
            fields = privacy.originals_of(episode_id, index)
            if fields:
                lines.append(json.dumps({"episode": episode_id, "step": index, "fields": fields}, ensure_ascii=False))
            shot = f"{base}/{index}/screenshot"
            if default_storage.exists(shot):
                with default_storage.open(shot, "rb") as handle:
                    yield f"originals/{episode_id}-{index}.jpg", handle.read()
    yield "originals/steps.jsonl", ("\n".join(lines) + "\n" if lines else "").encode()
