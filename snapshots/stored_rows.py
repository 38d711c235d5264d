"""Episodes' rows rendered once and stored (issue 38: snapshot builds at scale): a build reads each episode's rows as
its snapshot writes them (JSONL lines, redacted) and as its Parquet takes them, and renders only the episodes that
have none stored yet, storing what it renders. A freeze of episodes frozen before is then mostly a concatenation.

What decides an episode's rows besides its own records is the rendering's ``key``: the kind, the target the rows are
rendered for (agent.rows.RenderedFor), the project's redaction policy (its digest) and the code that renders them
(a digest of its modules' source, :func:`code_digest`): a changed setting or a new release renders anew, never serving
stale rows. What an episode's rows are made of (the episode, its steps, their rejections and replays, its
judgements, its task's and checkpoint's records) is watched by database triggers (migrations 0002, 0003): any
change counts up the episode's RowsVersion and drops its renderings, and a rendering is served only while it was
read at the current count, so a change that lands while a build renders is never served either.

A DPO branch's rows are its pair with its parent, decided by both episodes' records: they are rendered every time,
never stored."""
from __future__ import annotations

import functools
import hashlib
import importlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
from django.db import connection

from agent.rows import RenderedFor
from core import redaction
from snapshots.buckets import rows_iter
from snapshots.models import SnapshotKind

FORMAT = 1  # of the stored blobs: count it up when what they hold changes outside the modules below

# The modules whose code decides a row's content: the renderers, the prompt and system prompts, the action formats,
# redaction and its detectors, and this module (the blobs' format).
_MODULES = ("agent.rows", "agent.prompt", "agent.system_prompts", "agent.actions", "agent.images", "agent.rollout",
            "agent.envs.base", "agent.formats", "core.redaction", "core.detectors", "rollouts.steps", "snapshots.buckets",
            "snapshots.rows", "snapshots.snapshot_kinds", "snapshots.branch_pairs", "snapshots.prm_labels",
            "snapshots.stored_rows")


@functools.cache
def code_digest() -> str:
    """Computed once a process, at its first rendering key (a build), not at every import of the module."""
    digest = hashlib.sha256(str(FORMAT).encode())
    for name in _MODULES:
        module = importlib.import_module(name)
        path = Path(module.__file__)
        files = sorted(path.parent.glob("*.py")) if path.name == "__init__.py" else [path]  # a package: all of it
        for file in files:
            digest.update(file.name.encode() + b"\0" + file.read_bytes())
    try:
        import phonenumbers  # the phone detector's data

        digest.update(phonenumbers.__version__.encode())
    except ImportError:
        pass
    return digest.hexdigest()


_encode = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode  # data.jsonl's lines
_encode_ordered = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # keys in the rows' order


def rendering_key(kind: str, target: RenderedFor, settings: dict | None) -> str:
    """What an episode's stored rows of ``kind`` were rendered under besides its records."""
    policy = redaction.policy_of(settings).digest
    key = [kind, target.to_dict(), policy, code_digest()]
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def parquet_row(row: dict) -> dict:
    """A row as data.parquet takes it: ``meta`` (free-form) as a JSON string, so every row group has one schema."""
    return {**row, "meta": json.dumps(row.get("meta", {}), sort_keys=True)}


@dataclass
class Rendered:
    """One episode's rows: how many, its task's and checkpoint's names, and the rows as data.jsonl's lines
    (``jsonl``) and as JSON lines of :func:`parquet_row` in the rows' own key order (``parquet``)."""
    episode_id: int
    rows: int
    task: str
    checkpoint: str
    jsonl: bytes
    parquet: bytes


def rendered(rows: list[dict], episode_id: int, task: str, checkpoint: str) -> Rendered:
    return Rendered(episode_id=episode_id, rows=len(rows), task=task, checkpoint=checkpoint,
                    jsonl="".join(_encode(row) + "\n" for row in rows).encode(),
                    parquet="".join(_encode_ordered(parquet_row(row)) + "\n" for row in rows).encode())


_READ = """
SELECT r.episode_id, r.rows, r.task, r.checkpoint, r.jsonl, r.parquet
FROM snapshots_renderedrows r JOIN snapshots_rowsversion v ON v.episode_id = r.episode_id AND v.version = r.version
WHERE r.episode_id = ANY(%s) AND r.kind = %s AND r.key = %s"""
_VERSIONS_MADE = """
INSERT INTO snapshots_rowsversion (episode_id, version) SELECT id, 0 FROM flywheel_episode WHERE id = ANY(%s)
ON CONFLICT (episode_id) DO NOTHING"""
_VERSIONS = "SELECT episode_id, version FROM snapshots_rowsversion WHERE episode_id = ANY(%s)"
_OTHERS_DROPPED = "DELETE FROM snapshots_renderedrows WHERE episode_id = ANY(%s) AND kind = %s AND key <> %s"
_STORE = """
INSERT INTO snapshots_renderedrows (episode_id, kind, key, version, rows, task, checkpoint, jsonl, parquet)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (episode_id, kind, key) DO UPDATE SET version = EXCLUDED.version, rows = EXCLUDED.rows,
    task = EXCLUDED.task, checkpoint = EXCLUDED.checkpoint, jsonl = EXCLUDED.jsonl, parquet = EXCLUDED.parquet
WHERE snapshots_renderedrows.version < EXCLUDED.version"""


def episodes_rendered(kind: str, episode_ids: Sequence[int], target: RenderedFor, lineage: dict | None,
                      settings: dict | None, *, chunk: int = 200) -> Iterator[Rendered]:
    """Each of ``episode_ids`` (in id order) that still exists, with its rows of ``kind`` rendered for ``target``
    and redacted by the project's policy (``settings``): stored ones read back, the others rendered and stored.
    ``chunk`` episodes are read at a time. A build whose project changed its policy since the snapshot (``lineage``) was asked for is
    refused (ApplicationError, core.redaction.rows_redact)."""
    redaction.rows_redact([], lineage, settings)  # refused before any work, whatever is stored
    key = rendering_key(kind, target, settings)
    for start in range(0, len(episode_ids), chunk):
        ids = list(episode_ids[start:start + chunk])
        found: dict[int, Rendered] = {}
        connection.ensure_connection()
        # A cursor of psycopg's own, for binary results: Django's sends the query as text and gets bytea back as hex
        # text to decode, twice the bytes (half the read of a warm build).
        with psycopg.Cursor(connection.connection) as cursor:
            cursor.execute(_READ, [ids, kind, key], binary=True)
            for episode_id, rows, task, checkpoint, jsonl, parquet in cursor.fetchall():
                found[episode_id] = Rendered(episode_id, rows, task, checkpoint, jsonl, parquet)
        missing = [pk for pk in ids if pk not in found]
        if missing:
            found.update(_render(kind, missing, target, lineage, settings, key))
        for pk in ids:
            if pk in found:  # an episode deleted since the freeze is left out, as rows_iter leaves it out
                yield found[pk]


def _render(kind: str, episode_ids: list[int], target: RenderedFor, lineage: dict | None, settings: dict | None,
            key: str) -> dict[int, Rendered]:
    """The rows of ``episode_ids`` rendered now, stored under ``key`` with the episodes' versions read BEFORE their
    records: a change committed after that read has counted the version past the stored one."""
    with connection.cursor() as cursor:
        cursor.execute(_VERSIONS_MADE, [episode_ids])
        cursor.execute(_VERSIONS, [episode_ids])
        versions = dict(cursor.fetchall())
    out: dict[int, Rendered] = {}
    for episode, rows in rows_iter(kind, episode_ids, target=target):
        rows = redaction.rows_redact(rows, lineage, settings)
        out[episode.pk] = rendered(rows, episode.pk, episode.task.task_name,
                                   episode.checkpoint.name if episode.checkpoint_id else "(none)")
        if kind == SnapshotKind.DPO and episode.parent_id is not None:
            versions.pop(episode.pk, None)  # a branch's pair: never stored
    made = [out[pk] for pk in out if pk in versions]
    with connection.cursor() as cursor:
        cursor.execute(_OTHERS_DROPPED, [[r.episode_id for r in made], kind, key])  # one rendering a kind
        if made:
            cursor.executemany(_STORE, [(r.episode_id, kind, key, versions[r.episode_id], r.rows, r.task,
                                         r.checkpoint, r.jsonl, r.parquet) for r in made])
    return out
