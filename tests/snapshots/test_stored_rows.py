"""Episodes' rows rendered once and stored (snapshots/stored_rows.py, issue 38): a build from stored rows writes the
bytes, hash and Parquet table a build that renders every episode writes, and what changes an episode's rows (a
person's edit after it finished, a review's step labels, a task's rename, the redaction policy, the target) is never
served from a stale rendering, not even one rendered while the change landed."""
import io

import pyarrow.parquet as pq
import pytest
from django.core.files.storage import default_storage

from annotation.reviews import review_submit
from projects.models import Project
from rollouts.models import Judgement, Step
from snapshots import build, stored_rows
from snapshots.export import ParquetRows
from snapshots.models import DatasetSnapshot, RenderedRows, SnapshotStatus
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db

EDITED = {"actor": "edited", "thought": "the OK button is lower", "action": {"name": "click", "args": {"x": 80, "y": 120}},
          "proposal": {"thought": "click cancel", "action": {"name": "click", "args": {"x": 5, "y": 5}},
                       "raw": "Thought: click cancel\nAction: click(x=5, y=5)"}}
REJECTED = {"rejections": [{"action": {"name": "click", "args": {"x": 1, "y": 1}}, "thought": "no",
                            "raw": "Thought: no\nAction: click(x=1, y=1)", "reason": "wrong one"}]}


def _build(project, kind: str, stored: bool, processes: int = 1):
    snapshot = build.snapshot_create(project=project, kind=kind, build=False)
    built = build.snapshot_build(snapshot_id=snapshot.pk, processes=processes, stored=stored)
    assert built.status == SnapshotStatus.READY, built.error
    with default_storage.open(built.file, "rb") as fh:
        jsonl = fh.read()
    with default_storage.open(built.parquet_file, "rb") as fh:
        table = pq.read_table(io.BytesIO(fh.read()))
    members = list(built.members.order_by("episode_id").values_list("episode_id", "rows"))
    DatasetSnapshot.objects.filter(pk=built.pk).delete()  # so the next freeze of the same data builds anew
    return built, jsonl, table, members


def _same(a, b) -> None:
    (one, one_jsonl, one_table, one_members), (two, two_jsonl, two_table, two_members) = a, b
    assert two_jsonl == one_jsonl and two.sha256 == one.sha256 and two.rows == one.rows
    assert two_table.schema.equals(one_table.schema) and two_table.to_pylist() == one_table.to_pylist()
    assert two_members == one_members
    assert two.lineage["tasks"] == one.lineage["tasks"] and two.lineage["checkpoints"] == one.lineage["checkpoints"]


def _episodes(project, task, n: int = 9):
    for i in range(n):  # steps of several shapes: a person's edit, a rejected proposal, a void turn, 1 to 3 steps
        specs = [{"thought": f"episode {i} step {s} \u00e9 \"q\"\n"} for s in range(1 + i % 3)]
        if i % 3 == 0:
            specs[0] = EDITED
        if i % 4 == 1:
            specs[-1] = {**specs[-1], **REJECTED}
        if i == 5:
            specs.append({"action": None, "raw": "no action here"})
        make_finished_episode(project, task, steps=specs, reward=1.0 if i % 5 else 0.0,
                              mode="supervised" if i % 2 else "autonomous")


def _not_rendered(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("an episode was rendered again")
    monkeypatch.setattr(stored_rows, "rows_iter", refuse)


@pytest.mark.parametrize("kind", ["sft", "dpo", "rl", "ct"])
def test_a_build_from_stored_rows_writes_the_bytes_hash_and_table_of_a_build_that_renders(demo, monkeypatch, kind):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=12)  # 12 episodes, several row groups below: a Parquet batch of 4 rows
    monkeypatch.setattr(build, "ParquetRows", lambda path: ParquetRows(path, batch=4))
    rendered = _build(project, kind, stored=False)
    assert not RenderedRows.objects.exists()  # a build told not to store stores nothing
    cold = _build(project, kind, stored=True)  # renders them, and stores them
    assert RenderedRows.objects.filter(kind=kind).count() == cold[0].episodes
    _not_rendered(monkeypatch)
    warm = _build(project, kind, stored=True)  # every episode's rows read back
    _same(rendered, cold)
    _same(rendered, warm)


def test_a_prm_build_from_stored_rows_is_the_rendered_one_and_a_new_review_renders_anew(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    episode = make_finished_episode(project, task, steps=[{}, {}, {}, {}], reward=0.0)
    review_submit(episode=episode, reviewer=demo["manager"], verdict="reject", step_labels={"0": "good", "1": "good"})
    _same(_build(project, "prm", stored=False), _build(project, "prm", stored=True))
    review_submit(episode=episode, reviewer=demo["admin"], verdict="reject", step_labels={"1": "critical"})
    after = _build(project, "prm", stored=True)
    assert after[0].rows == 2 and after[2].column("meta").to_pylist()[1].count("critical") == 1
    _same(_build(project, "prm", stored=False), after)
    Judgement.objects.create(episode=episode, verdict="failure", reason="clicked the wrong one", judge="rule")
    judged = _build(project, "prm", stored=True)  # a judge's verdict since: in each row's meta
    assert b"clicked the wrong one" in judged[1]
    _same(_build(project, "prm", stored=False), judged)


def test_a_persons_edit_after_the_episode_finished_is_in_the_next_build_not_the_stored_rows(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=3)
    before = _build(project, "sft", stored=True)
    step = Step.objects.filter(episode_id=before[3][0][0]).order_by("index").first()
    Step.objects.filter(pk=step.pk).update(thought="moved, a person's edit")  # the queryset path: no save() hook
    after = _build(project, "sft", stored=True)
    assert b"moved, a person's edit" in after[1]
    _same(_build(project, "sft", stored=False), after)
    # The other episodes were read back, not rendered: only the edited one was.
    assert RenderedRows.objects.filter(episode_id=step.episode_id).count() == 1
    Step.objects.filter(pk=step.pk).delete()  # a step deleted (a bulk delete: the statement's trigger)
    deleted = _build(project, "sft", stored=True)
    assert b"moved, a person's edit" not in deleted[1] and deleted[0].rows == after[0].rows - 1
    _same(_build(project, "sft", stored=False), deleted)


def test_a_renamed_task_a_changed_target_or_policy_renders_anew(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=2)
    first = _build(project, "sft", stored=True)
    task.task_name = "renamed-task"
    task.save()
    renamed = _build(project, "sft", stored=True)
    assert b"renamed-task" in renamed[1] and renamed[0].lineage["tasks"] == {"renamed-task": first[0].rows}
    _same(_build(project, "sft", stored=False), renamed)
    # A policy that hides the word in every thought: another key, so rendered anew, and the old rendering gone.
    Project.objects.filter(pk=project.pk).update(
        settings={**project.settings, "redaction": {"words": ["episode"], "kinds": ["name"]}})
    project.refresh_from_db()
    redacted = _build(project, "sft", stored=True)
    assert b"episode 1 step" not in redacted[1] and b"[NAME]" in redacted[1]
    assert set(RenderedRows.objects.values_list("key", flat=True)) == {
        stored_rows.rendering_key("sft", build.export_target(project), project.settings)}
    _same(_build(project, "sft", stored=False), redacted)


def test_an_edit_that_lands_while_a_build_renders_is_not_served_by_the_next_build(demo, monkeypatch):
    project, task = demo["project"], demo["task"]
    _episodes(project, task, n=2)
    step = Step.objects.filter(episode__project=project, episode__env_reward=1.0).order_by("episode_id", "index").first()
    original = stored_rows.rows_iter

    def edited_meanwhile(*args, **kwargs):
        made = list(original(*args, **kwargs))  # rendered from the records as they were
        Step.objects.filter(pk=step.pk).update(thought="changed while rendering")
        yield from made

    monkeypatch.setattr(stored_rows, "rows_iter", edited_meanwhile)
    during = _build(project, "sft", stored=True)
    assert b"changed while rendering" not in during[1]  # this build's rows were read before the edit
    monkeypatch.setattr(stored_rows, "rows_iter", original)
    after = _build(project, "sft", stored=True)
    assert b"changed while rendering" in after[1]
    _same(_build(project, "sft", stored=False), after)


def test_parquet_made_of_json_lines_is_the_table_of_the_rows_added_even_where_arrows_reader_refuses(tmp_path):
    first = {"x": 1, "meta": {"b": 1, "a": [1]}, "messages": [{"role": "user", "content": "\u00e9 \"q\"\n"}],
             "images": []}
    rows = [first, first,
            {**first, "x": 1.5},  # a float in the first group's int column: Arrow's JSON reader refuses it
            {"messages": [{"content": "z", "role": "assistant"}], "extra": 1},  # keys in another order, one unknown
            {"x": 2, "meta": {}}, {"x": 3, "images": [], "messages": []}, first]
    added, lines = ParquetRows(str(tmp_path / "added.parquet"), batch=2), ParquetRows(str(tmp_path / "lines.parquet"),
                                                                                      batch=2)
    for row in rows:
        added.add(row)
    made = stored_rows.rendered(rows, 1, "task", "(none)")
    split = made.parquet.splitlines(keepends=True)
    lines.add_lines(b"".join(split[:3]))  # as two episodes' rows: a batch across both
    lines.add_lines(b"".join(split[3:]))
    added.close()
    lines.close()
    one, two = pq.ParquetFile(tmp_path / "added.parquet"), pq.ParquetFile(tmp_path / "lines.parquet")
    assert two.num_row_groups == one.num_row_groups == 4
    assert two.schema_arrow.equals(one.schema_arrow)
    assert two.read().to_pylist() == one.read().to_pylist()
    assert made.rows == 7 and made.jsonl.count(b"\n") == 7
