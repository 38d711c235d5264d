"""Process-reward (PRM) rows from reviewers' step labels: content by a hand-computed example, a snapshot exported and
loaded with the datasets library, and the refusals."""
import io
import json
import zipfile

import pytest
from rest_framework.test import APIClient

from agent.rows import PRMRow, prompt_text, row_from_dict
from annotation.reviews import review_submit
from core.errors import ApplicationError
from snapshots import buckets
from snapshots import build as snapshots
from rollouts.models import Episode, Judgement, Step
from snapshots.models import SnapshotStatus
from tests.factories import make_finished_episode

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def build(project, kind="prm"):
    snapshot = snapshots.snapshot_create(project=project, kind=kind, build=False)
    return snapshots.snapshot_build(snapshot_id=snapshot.pk)


def labelled_episode(demo):
    """Four steps, three reviewers. By hand: step 0 good (1 of 1 says good); step 1 good (2 of 3); step 2 bad (a tie,
    1 of 2): the first error; step 3 is after it and makes no row, whatever it was labelled."""
    project, task = demo["project"], demo["task"]
    episode = make_finished_episode(project, task, steps=[{}, {}, {}, {}], reward=0.0)
    review_submit(episode=episode, reviewer=demo["manager"], verdict="reject",
                  step_labels={"0": "good", "1": "good", "2": "wrong", "3": "good"})
    review_submit(episode=episode, reviewer=demo["admin"], verdict="reject", step_labels={"1": "good", "2": "good"})
    review_submit(episode=episode, reviewer=demo["staff"], verdict="reject", step_labels={"1": "critical"})
    return Episode.objects.get(pk=episode.pk)


def test_prm_rows_label_each_step_by_the_reviewers_majority_up_to_the_first_error(demo):
    episode = labelled_episode(demo)
    Judgement.objects.create(episode=episode, verdict="failure", reason="never clicked", confidence=1.0, judge="rule")
    steps, target = list(episode.steps.order_by("index")), buckets.export_target(demo["project"])
    rows = buckets.episode_rows("prm", episode, steps, target)
    assert [(row["meta"]["step_index"], row["labels"]) for row in rows] == [(0, [True]), (1, [True]), (2, [False])]
    assert [row["meta"]["first_error"] for row in rows] == [False, False, True]
    assert rows[1]["meta"]["step_labels"] == {"man": "good", "adm": "good", "root": "critical"}
    assert rows[2]["meta"]["reviewers"] == ["adm", "man"]
    assert rows[2]["meta"]["judge"] == {"verdict": "failure", "reason": "never clicked", "confidence": 1.0}
    assert rows[2]["meta"]["review_status"] == "rejected" and rows[2]["meta"]["label_source"] == "review"

    # The prompt is the one an SFT row of the same step carries (the model's prompt there), as text; the completion
    # is the step's executed turn as the target writes it.
    sft = buckets.episode_rows("sft", episode, steps, target)
    for row, sft_row in zip(rows, sft):
        assert row["prompt_messages"] == sft_row["messages"][:-1]
        assert row["completions"] == [sft_row["messages"][-1]["content"]]
        assert row["prompt"] == prompt_text(row["prompt_messages"])
        assert row["prompt"].startswith("<|system|>\n") and row["prompt"].endswith("<|assistant|>\n")
        assert isinstance(row_from_dict("prm", row, "row"), PRMRow)
    assert rows[1]["completions"] == ["Thought: step 1\nAction: click(x=11, y=20)"]
    assert buckets.buckets(demo["project"])["prm"] == {"rows": 3, "episodes": 1, "new_rows": 3}


def test_a_prm_snapshot_exports_and_loads_with_datasets_its_labels_on_the_stored_steps(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    episode = labelled_episode(demo)
    other = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}], reward=1.0)
    review_submit(episode=other, reviewer=demo["manager"], verdict="accept", step_labels={"1": "wasteful"})
    make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)  # no labels: no rows
    snapshot = build(demo["project"])
    assert snapshot.status == SnapshotStatus.READY and (snapshot.rows, snapshot.episodes) == (4, 2)
    response = client_for(demo["manager"]).get(f"/api/v1/snapshots/{snapshot.pk}/export")
    zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).extractall(tmp_path)
    loaded = load_dataset("json", data_files=str(tmp_path / "data.jsonl"), split="train")
    assert loaded["labels"] == [[True], [True], [False], [False]]
    from_parquet = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    assert from_parquet["completions"] == loaded["completions"] and from_parquet["prompt"] == loaded["prompt"]
    for row in loaded:
        meta = row["meta"] if isinstance(row["meta"], dict) else json.loads(row["meta"])
        step = Step.objects.get(pk=meta["step_id"])  # each label lines up with the stored step it names
        assert (step.episode_id, step.index) == (meta["episode_id"], meta["step_index"])
        assert row["completions"] == [f"Thought: {step.thought}\nAction: click(x={step.action['args']['x']}, y=20)"]
    assert [json.loads(line)["meta"]["episode_id"] for line in (tmp_path / "data.jsonl").read_text().splitlines()] \
        == [episode.pk] * 3 + [other.pk]


def test_freezing_again_after_more_steps_are_labelled_makes_a_new_snapshot(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}, {}], reward=1.0)
    review_submit(episode=episode, reviewer=demo["manager"], verdict="accept", step_labels={"0": "good"})
    first = build(demo["project"])
    again = snapshots.snapshot_create(project=demo["project"], kind="prm", build=False)
    assert again.duplicate and again.pk == first.pk  # nothing changed: the same snapshot
    review_submit(episode=episode, reviewer=demo["manager"], verdict="accept", step_labels={"0": "good", "1": "wrong"})
    second = build(demo["project"])
    assert second.pk != first.pk and (first.rows, second.rows) == (1, 2)


def test_the_snapshot_command_freezes_prm_rows_and_says_why_when_there_are_none(demo, capsys):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="label steps good, wasteful, wrong or critical"):
        call_command("snapshot_create", demo["project"].slug, "prm")
    labelled_episode(demo)
    call_command("snapshot_create", demo["project"].slug, "prm")
    assert json.loads(capsys.readouterr().out)["rows"] == 3


def test_training_the_policy_on_a_prm_snapshot_is_refused_with_where_it_goes(demo):
    labelled_episode(demo)
    snapshot = build(demo["project"])
    response = client_for(demo["manager"]).post(f"/api/v1/projects/{demo['project'].pk}/runs/",
                                                {"snapshot": snapshot.pk}, format="json")
    assert response.status_code == 400 and "PRMTrainer" in response.json()["detail"]


def test_a_prm_snapshot_of_episodes_without_step_labels_is_refused_with_what_to_do(demo):
    episode = make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)
    review_submit(episode=episode, reviewer=demo["manager"], verdict="accept")  # a verdict, no step labels
    with pytest.raises(ApplicationError, match="label steps good, wasteful, wrong or critical"):
        snapshots.snapshot_create(project=demo["project"], kind="prm", build=False)
    response = client_for(demo["manager"]).post(f"/api/v1/projects/{demo['project'].pk}/snapshots/",
                                                {"kind": "prm"}, format="json")
    assert response.status_code == 400 and "step labels" in response.json()["detail"]
    assert buckets.buckets(demo["project"])["prm"]["rows"] == 0


def test_a_branchs_labelled_copies_make_no_prm_rows_and_a_bad_copy_ends_its_rows(demo):
    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[{}, {}], reward=0.0)
    branch = make_finished_episode(project, task, steps=[{}, {}, {}], reward=1.0)
    Episode.objects.filter(pk=branch.pk).update(parent=parent, branched_at=1, seed=parent.seed)
    Step.objects.filter(episode=branch, index=0).update(info={"replayed_from": {"episode": parent.pk, "step": 0}})
    review_submit(episode=branch, reviewer=demo["manager"], verdict="accept",
                  step_labels={"0": "good", "1": "good", "2": "good"})
    assert buckets.buckets(project)["prm"]["rows"] == 2  # steps 1 and 2; the copy 0 is the parent's
    review_submit(episode=branch, reviewer=demo["manager"], verdict="accept", step_labels={"0": "wrong", "1": "good"})
    assert buckets.buckets(project)["prm"]["rows"] == 0


@pytest.mark.parametrize("row, message", [
    ({"prompt": "p", "completions": ["a", "b"], "labels": [True]}, "2 completions but 1 labels"),
    ({"prompt": "p", "completions": ["a"], "labels": ["yes"]}, "labels must be a list of true / false"),
    ({"prompt": "", "completions": ["a"], "labels": [True]}, "prompt must be a non-empty string"),
    ({"prompt": "p", "labels": [True]}, "missing \\['completions'\\]"),
])
def test_a_prm_row_that_does_not_line_up_is_refused_by_name(row, message):
    with pytest.raises(ValueError, match=message):
        row_from_dict("prm", row, "data.jsonl:3")
