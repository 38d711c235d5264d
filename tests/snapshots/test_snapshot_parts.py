"""A snapshot build split over processes (snapshots/build.py, issue 38): the same files and sha256 as the build in
one process, and a part that fails fails the build with its reason, leaving the builder's own session working."""
import io

import pyarrow.parquet as pq
import pytest
from django.core.files.storage import default_storage
from django.db import connection

from snapshots import build
from snapshots.models import DatasetSnapshot, SnapshotStatus
from projects.models import Project
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db(transaction=True)  # the build's other processes read what the test committed

EDITED = {"actor": "edited", "thought": "the OK button is lower", "action": {"name": "click", "args": {"x": 80, "y": 120}},
          "proposal": {"thought": "click cancel", "action": {"name": "click", "args": {"x": 5, "y": 5}},
                       "raw": "Thought: click cancel\nAction: click(x=5, y=5)"}}


def _build(project, processes: int):
    snapshot = build.snapshot_create(project=project, kind="sft", build=False)
    built = build.snapshot_build(snapshot_id=snapshot.pk, processes=processes)
    assert built.status == SnapshotStatus.READY, built.error
    with default_storage.open(built.file, "rb") as fh:
        jsonl = fh.read()
    with default_storage.open(built.parquet_file, "rb") as fh:
        table = pq.read_table(io.BytesIO(fh.read()))
    members = list(built.members.order_by("episode_id").values_list("episode_id", "rows"))
    DatasetSnapshot.objects.filter(pk=built.pk).delete()  # so the next freeze of the same data builds anew
    return built, jsonl, table, members


def test_a_snapshot_built_in_four_processes_has_the_one_process_builds_bytes_and_hash(demo):
    project, task = demo["project"], demo["task"]
    for n in range(9):  # steps of several shapes: a person's edit, a rejected proposal, episodes of 1 to 3 steps
        specs = [{"thought": f"episode {n} step {i} \u00e9"} for i in range(1 + n % 3)]
        if n % 3 == 0:
            specs[0] = EDITED
        if n % 4 == 1:
            specs[-1] = {**specs[-1], "rejections": [{"action": {"name": "click", "args": {"x": 1, "y": 1}},
                                                      "thought": "no", "raw": "Thought: no\nAction: click(x=1, y=1)",
                                                      "reason": "wrong one"}]}
        make_finished_episode(project, task, steps=specs, reward=1.0, mode="supervised" if n % 2 else "autonomous")
    one, one_jsonl, one_table, one_members = _build(project, processes=1)
    four, four_jsonl, four_table, four_members = _build(project, processes=4)
    assert one.rows == four.rows == 18 and one.episodes == four.episodes == 9
    assert four_jsonl == one_jsonl and four.sha256 == one.sha256 and four.size_bytes == one.size_bytes
    assert four_table.schema.equals(one_table.schema) and four_table.to_pylist() == one_table.to_pylist()
    assert four_members == one_members
    assert four.lineage["tasks"] == one.lineage["tasks"] and four.lineage["checkpoints"] == one.lineage["checkpoints"]


def test_a_part_that_fails_fails_the_build_with_its_reason_and_the_builders_session_lives_on(demo):
    project, task = demo["project"], demo["task"]
    for _ in range(4):
        make_finished_episode(project, task, steps=[{}], reward=1.0)
    snapshot = build.snapshot_create(project=project, kind="sft", build=False)
    # Every part refuses its rows: the policy changed after the freeze was asked for.
    Project.objects.filter(pk=project.pk).update(settings={**project.settings, "redaction": {"enabled": False}})
    built = build.snapshot_build(snapshot_id=snapshot.pk, processes=3)
    assert built.status == SnapshotStatus.FAILED
    assert "redaction policy changed" in built.error
    with connection.cursor() as cursor:  # the children left the parent's connection (and its lock) alone
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone()[0] == 0
