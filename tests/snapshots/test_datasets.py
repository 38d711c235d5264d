"""Routing (validator V), snapshots and their export, through the services and the real API."""
import hashlib
import io
import json
import zipfile

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import IntegrityError, transaction
from rest_framework.test import APIClient

from annotation.reviews import review_submit
from snapshots import rows as dataset_rows
from snapshots import buckets
from snapshots import build as snapshots
from snapshots import export
from snapshots.models import DatasetSnapshot, SnapshotStatus
from rollouts.models import Step
from core.errors import ApplicationError
from core.limits import LIMITS
from tests.factories import make_finished_episode, make_task

pytestmark = pytest.mark.django_db

EDITED = {"actor": "edited", "thought": "the OK button is lower", "action": {"name": "click", "args": {"x": 80, "y": 120}},
          "proposal": {"thought": "click cancel", "action": {"name": "click", "args": {"x": 5, "y": 5}},
                       "raw": "Thought: click cancel\nAction: click(x=5, y=5)"}}


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def build(project, kind, **filter_):
    snapshot = snapshots.snapshot_create(project=project, kind=kind, filter=filter_, build=False)
    return snapshots.snapshot_build(snapshot_id=snapshot.pk)


def episode_ids(project, kind) -> set[int]:
    return set(buckets.bucket_episodes(project, kind).values_list("pk", flat=True))


def test_reward_rule_sends_successes_to_sft_and_failures_to_ct(demo):
    project, task = demo["project"], demo["task"]
    good = make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    bad = make_finished_episode(project, task, steps=[{}], reward=0.0)
    assert episode_ids(project, "sft") == {good.pk}
    assert episode_ids(project, "ct") == {bad.pk}
    counts = buckets.buckets(project)
    assert (counts["sft"]["rows"], counts["ct"]["rows"]) == (2, 1)


def test_a_persons_outcome_the_check_contradicts_waits_for_a_review_which_then_routes_it(demo):
    project, task = demo["project"], demo["task"]
    agreed = make_finished_episode(project, task, steps=[{}], reward=1.0, outcome="success")
    contradicted = make_finished_episode(project, task, steps=[{}], reward=0.0, outcome="success")
    gave_up_on_done = make_finished_episode(project, task, steps=[{}], reward=1.0, outcome="failure")
    assert agreed.review_reason == ""
    assert contradicted.review_reason == ("A person finished with success (the task was done), but the task's own "
                                          "check paid 0 (this project counts 0.5 or more as done).")
    assert "finished with failure" in gave_up_on_done.review_reason
    # neither the person's word nor the reward alone routes them
    assert episode_ids(project, "sft") == {agreed.pk} and episode_ids(project, "ct") == set()
    review_submit(episode=contradicted, reviewer=demo["manager"], verdict="accept")
    review_submit(episode=gave_up_on_done, reviewer=demo["manager"], verdict="reject")
    assert episode_ids(project, "sft") == {agreed.pk, contradicted.pk}
    assert episode_ids(project, "ct") == {gave_up_on_done.pk}


def test_where_no_check_scored_an_episode_a_persons_success_counts_as_done(demo):
    project, task = demo["project"], demo["task"]
    person = make_finished_episode(project, task, steps=[{}], reward=None, outcome="success")
    nobody = make_finished_episode(project, task, steps=[{}], reward=None)
    assert person.review_reason == ""
    assert (episode_ids(project, "sft"), episode_ids(project, "ct")) == ({person.pk}, {nobody.pk})


def test_review_rule_routes_by_verdict_and_leaves_unreviewed_episodes_out(demo):
    project, task = demo["project"], demo["task"]
    buckets.routing_set(project=project, actor=demo["manager"], rule="review")
    accepted = make_finished_episode(project, task, steps=[{}], reward=0.0)
    rejected = make_finished_episode(project, task, steps=[{}], reward=1.0)
    make_finished_episode(project, task, steps=[{}], reward=1.0)  # unreviewed: in neither bucket
    review_submit(episode=accepted, reviewer=demo["manager"], verdict="accept")
    review_submit(episode=rejected, reviewer=demo["manager"], verdict="reject")
    assert episode_ids(project, "sft") == {accepted.pk}
    assert episode_ids(project, "ct") == {rejected.pk}


def test_both_rule_needs_the_reward_and_the_accepting_review(demo):
    project, task = demo["project"], demo["task"]
    buckets.routing_set(project=project, actor=demo["manager"], rule="both", reward_threshold=0.5)
    both = make_finished_episode(project, task, steps=[{}], reward=0.9)
    reward_only = make_finished_episode(project, task, steps=[{}], reward=0.9)
    review_only = make_finished_episode(project, task, steps=[{}], reward=0.1)
    for episode in (both, review_only):
        review_submit(episode=episode, reviewer=demo["manager"], verdict="accept")
    assert episode_ids(project, "sft") == {both.pk}
    assert episode_ids(project, "ct") == {review_only.pk}
    assert reward_only.pk not in episode_ids(project, "ct")  # waits for its review


def test_every_edited_step_yields_a_dpo_pair_of_correction_over_proposal(demo):
    project, task = demo["project"], demo["task"]
    episode = make_finished_episode(project, task, steps=[{}, EDITED], mode="supervised", reward=0.0)
    snapshot = build(project, "dpo")
    assert snapshot.status == SnapshotStatus.READY and snapshot.rows == 1
    (row,) = export.snapshot_preview(snapshot, 10)
    assert row["chosen"] == [{"role": "assistant", "content": "Thought: the OK button is lower\nAction: click(x=80, y=120)"}]
    assert row["rejected"] == [{"role": "assistant", "content": "Thought: click cancel\nAction: click(x=5, y=5)"}]
    # the prompt rendered from the step's structure (the factory's stored prompt is a placeholder), text only
    assert row["prompt"][-1] == {"role": "user", "content": "URL: /task.html\n(no elements)"}
    step = Step.objects.get(episode=episode, index=1)
    assert row["meta"]["step_id"] == step.pk
    # rendered for the tiny text model a run starts from with no deployment: no images; the screen is named in meta
    assert row["images"] == [] and row["meta"]["screenshot"] == dataset_rows.image_path(step.screenshot)
    assert row["rendered_for"] == {"style": "named", "action_format": "loupe", "reads_images": False,
                                   "history_images": 0}


def test_dpo_pairs_only_where_a_person_changed_the_action_or_rewrote_the_thought(demo):
    """Takeovers that did what the model proposed, and edits that changed nothing, teach nothing: no pair, and
    not counted as interventions. An edit of the thought alone is a pair, marked so."""
    project, task = demo["project"], demo["task"]
    proposal = {"thought": "click ok", "action": {"name": "click", "args": {"x": 10, "y": 20}},
                "raw": "Thought: click ok\nAction: click(x=10, y=20)"}
    same_takeover = {"actor": "human", "thought": "", "action": proposal["action"], "proposal": proposal}
    same_edit = {"actor": "edited", "thought": "click  ok", "action": proposal["action"], "proposal": proposal}
    thought_edit = {"actor": "edited", "thought": "the OK button is the first one", "action": proposal["action"],
                    "proposal": proposal}
    episode = make_finished_episode(project, task, steps=[same_takeover, same_edit, thought_edit, EDITED],
                                    mode="supervised", reward=0.0)
    steps = {s.index: s for s in Step.objects.filter(episode=episode)}
    assert [steps[i].correction for i in range(4)] == ["same", "same", "thought", "action"]
    assert episode.n_interventions == 2
    assert buckets.buckets(project)["dpo"]["rows"] == 2
    rows = export.snapshot_preview(build(project, "dpo"), 10)
    assert [(r["meta"]["step_index"], r["meta"]["differs"]) for r in rows] == [(2, "thought"), (3, "action")]
    assert rows[0]["chosen"][0]["content"] == "Thought: the OK button is the first one\nAction: click(x=10, y=20)"


def test_steps_a_person_took_in_control_without_a_proposal_count_as_interventions(demo):
    project, task = demo["project"], demo["task"]
    in_control = {"actor": "human", "thought": "", "action": {"name": "click", "args": {"x": 3, "y": 4}}}
    episode = make_finished_episode(project, task, steps=[{}, in_control, in_control], mode="supervised", reward=1.0)
    assert episode.n_interventions == 2


def test_a_rejected_proposal_is_a_dpo_pair_under_the_prompt_it_answered(demo):
    project, task = demo["project"], demo["task"]
    wrong = {"action": {"name": "click", "args": {"x": 1, "y": 1}}, "thought": "top left?",
             "raw": "Thought: top left?\nAction: click(x=1, y=1)", "reason": "that is the logo"}
    same_as_run = {"action": {"name": "click", "args": {"x": 11, "y": 20}}, "thought": "fine",
                   "raw": "Thought: fine\nAction: click(x=11, y=20)", "reason": "not sure yet"}
    episode = make_finished_episode(project, task, steps=[{}, {"rejections": [wrong, same_as_run]}],
                                    mode="supervised", reward=1.0)
    step = Step.objects.get(episode=episode, index=1)
    assert [(r.attempt, r.step_id) for r in step.rejections.order_by("attempt")] == [(1, step.pk), (2, step.pk)]
    assert episode.n_interventions == 1  # the model's step ran, after a person's rejects
    assert buckets.buckets(project)["dpo"]["rows"] == 1
    (row,) = export.snapshot_preview(build(project, "dpo"), 10)
    assert row["rejected"] == [{"role": "assistant", "content": "Thought: top left?\nAction: click(x=1, y=1)"}]
    assert row["chosen"] == [{"role": "assistant", "content": "Thought: step 1\nAction: click(x=11, y=20)"}]
    assert row["prompt"][-1] == {"role": "user", "content": "URL: /task.html\n(no elements)"}  # attempt 1: no feedback
    assert row["meta"]["pair"] == "rejection" and row["meta"]["reason"] == "that is the logo"
    sft = export.snapshot_preview(build(project, "sft"), 10)
    assert sft[1]["meta"]["rejected"] == [
        {"attempt": 1, "action": "click(x=1, y=1)", "reason": "that is the logo"},
        {"attempt": 2, "action": "click(x=11, y=20)", "reason": "not sure yet"}]


@pytest.mark.parametrize("kind", ["sft", "dpo", "rl"])
def test_a_builds_queries_do_not_grow_with_its_episodes_and_steps(demo, kind):
    # rows_iter reads steps as values and makes the instances itself: a column it left out and a row then read
    # would be fetched step by step, one query each, and so would rejections read through the step
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    project, task = demo["project"], demo["task"]
    rejected = {"action": {"name": "click", "args": {"x": 1, "y": 1}}, "thought": "no", "raw": "x", "reason": "wrong"}
    steps = [{}, {"action": None}, {}] if kind == "rl" else \
        [{}, {**EDITED, "rejections": [rejected]}, {}, {"rejections": [rejected]}]

    def queries(episodes: int) -> int:
        for _ in range(episodes):
            make_finished_episode(project, task, mode="autonomous" if kind == "rl" else "supervised", reward=1.0,
                                  steps=steps)
        ids = list(buckets.bucket_episodes(project, kind).order_by("pk").values_list("pk", flat=True))
        with CaptureQueriesContext(connection) as captured:
            rows = [row for _, rows in buckets.rows_iter(kind, ids, target=buckets.export_target(project))
                    for row in rows]
        assert rows, kind
        return len(captured)

    assert queries(2) == queries(8)


def test_rl_rows_for_a_text_target_are_steps_in_words_with_void_turns_flagged(demo):
    project, task = demo["project"], demo["task"]
    auto = make_finished_episode(project, task, steps=[{"action": None}, {"reward": 1.0}], reward=1.0)
    make_finished_episode(project, task, steps=[EDITED], mode="supervised", reward=1.0)
    snapshot = build(project, "rl")
    rows = export.snapshot_preview(snapshot, 10)
    assert [(row["meta"]["episode_id"], row["meta"]["step_index"], row["meta"]["void"]) for row in rows] == [
        (auto.pk, 0, True), (auto.pk, 1, False)]
    assert all(row["images"] == [] and not row["rendered_for"]["reads_images"] for row in rows)  # the screen in words
    assert [row["reward"]["prefix"] for row in rows] == [[], []]  # the void turn ran nothing
    assert rows[1]["messages"][-1]["role"] == "user" and "old_logprobs" not in rows[1]  # GRPO samples fresh answers


def test_sft_rows_load_in_the_trainer(demo, tmp_path):
    from trainer.data import read_dpo, read_sft
    from trainer.grpo import read_rows

    project, task = demo["project"], demo["task"]
    make_finished_episode(project, task, steps=[{}, {"action": None}, EDITED], mode="supervised", reward=1.0)
    make_finished_episode(project, task, steps=[{}], reward=1.0)
    readers = {"sft": read_sft, "dpo": read_dpo, "rl": lambda path: read_rows(path, vision=False)[0]}
    for kind, reader in readers.items():
        snapshot = build(project, kind)
        path = tmp_path / f"{kind}.jsonl"
        path.write_bytes(default_storage.open(snapshot.file).read())
        assert len(reader(path)) == snapshot.rows > 0


def test_a_person_who_only_spoke_contributes_their_spoken_thought(demo):
    project, task = demo["project"], demo["task"]
    make_finished_episode(project, task, reward=1.0, mode="supervised",
                          steps=[{"actor": "human", "thought": "", "human_thought": "the submit button is green"}])
    (row,) = export.snapshot_preview(build(project, "sft"), 1)
    assert row["messages"][-1]["content"].startswith("Thought: the submit button is green\nAction: click(")


def test_rows_use_a_polished_thought_where_present_and_the_raw_words_otherwise(demo):
    from rollouts.models import PolishState

    project, task = demo["project"], demo["task"]
    spoken = {"actor": "human", "thought": "", "human_thought": "um the the submit button"}
    episode = make_finished_episode(project, task, reward=1.0, mode="supervised", steps=[spoken, spoken, spoken, EDITED])
    polished = {0: ("The submit button.", PolishState.DONE), 1: ("I press submit.", PolishState.EDITED),
                2: ("A stale one.", PolishState.FAILED), 3: ("The OK button is the lower one.", PolishState.DONE)}
    for index, (text, state) in polished.items():
        Step.objects.filter(episode=episode, index=index).update(polished_thought=text, polish_state=state)
    thoughts = [row["messages"][-1]["content"].split("\nAction:")[0] for row in
                export.snapshot_preview(build(project, "sft"), 10)]
    assert thoughts == ["Thought: The submit button.", "Thought: I press submit.", "Thought: um the the submit button",
                        "Thought: The OK button is the lower one."]
    (pair,) = export.snapshot_preview(build(project, "dpo"), 10)
    assert pair["chosen"][0]["content"].startswith("Thought: The OK button is the lower one.\nAction: click(")


def test_an_approved_model_step_keeps_the_models_thought_unless_a_person_edited_the_polished_one(demo):
    from rollouts.models import PolishState

    project, task = demo["project"], demo["task"]
    approved = {"actor": "model", "thought": "the submit button is at the bottom", "human_thought": "yes that one"}
    episode = make_finished_episode(project, task, reward=1.0, mode="supervised", steps=[approved, approved])
    Step.objects.filter(episode=episode, index=0).update(polished_thought="Yes, that one.", polish_state=PolishState.DONE)
    Step.objects.filter(episode=episode, index=1).update(polished_thought="Submit is the last button.",
                                                          polish_state=PolishState.EDITED)
    thoughts = [row["messages"][-1]["content"].split("\nAction:")[0] for row in
                export.snapshot_preview(build(project, "sft"), 10)]
    assert thoughts == ["Thought: the submit button is at the bottom", "Thought: Submit is the last button."]


def test_export_bundle_round_trips_through_the_datasets_library(demo, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from datasets import load_dataset

    project, task = demo["project"], demo["task"]
    for _ in range(3):
        make_finished_episode(project, task, steps=[{}, {}, EDITED], mode="supervised", reward=1.0)
    snapshot = build(project, "sft")
    response = client_for(demo["manager"]).get(f"/api/v1/snapshots/{snapshot.pk}/export")
    assert response.status_code == 200 and response.streaming
    bundle = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    bundle.extractall(tmp_path)
    data = (tmp_path / "data.jsonl").read_bytes()
    assert hashlib.sha256(data).hexdigest() == snapshot.sha256 == response["X-Snapshot-Sha256"]
    source = [json.loads(line) for line in data.splitlines()]
    assert len(source) == snapshot.rows == 9

    from_json = load_dataset("json", data_files=str(tmp_path / "data.jsonl"), split="train")
    from_parquet = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    assert from_json["messages"] == [row["messages"] for row in source]
    assert from_parquet["messages"] == [row["messages"] for row in source]
    assert [json.loads(m) for m in from_parquet["meta"]] == [row["meta"] for row in source]
    for row in source:  # every image a row names is inside the bundle
        assert all((tmp_path / image).is_file() for image in row["images"])
    lineage = [json.loads(line) for line in (tmp_path / "lineage.jsonl").read_text().splitlines()]
    assert sum(item["rows"] for item in lineage) == 9 and len(lineage) == 3


def test_a_ready_snapshot_never_changes(demo):
    project, task = demo["project"], demo["task"]
    episode = make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    snapshot = build(project, "sft")
    before = default_storage.open(snapshot.file).read()

    # Later edits and reviews of the episode do not reach the frozen rows...
    Step.objects.filter(episode=episode).update(thought="rewritten later")
    review_submit(episode=episode, reviewer=demo["manager"], verdict="reject", comment="changed my mind")
    snapshot.refresh_from_db()
    assert default_storage.open(snapshot.file).read() == before
    assert hashlib.sha256(before).hexdigest() == snapshot.sha256 and snapshot.rows == 2
    # ...and the database refuses to alter it, whatever code tries.
    with pytest.raises(IntegrityError, match="frozen"), transaction.atomic():
        DatasetSnapshot.objects.filter(pk=snapshot.pk).update(rows=99)
    with pytest.raises(IntegrityError, match="frozen"), transaction.atomic():
        DatasetSnapshot.objects.filter(pk=snapshot.pk).update(sha256="0" * 64)


def test_new_rows_count_what_no_snapshot_of_that_kind_holds_yet(demo):
    project, task = demo["project"], demo["task"]
    make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    assert buckets.buckets(project)["sft"]["new_rows"] == 2
    build(project, "sft")
    assert buckets.buckets(project)["sft"] == {"rows": 2, "episodes": 1, "new_rows": 0}
    later = make_finished_episode(project, task, steps=[{}], reward=1.0)
    assert buckets.buckets(project)["sft"]["new_rows"] == 1
    second = build(project, "sft", only_new=True)
    assert second.rows == 1 and second.lineage["episodes"] == 1
    assert {row["meta"]["episode_id"] for row in export.snapshot_preview(second, 10)} == {later.pk}


def test_snapshot_filter_by_task_and_split(demo):
    project = demo["project"]
    held_out = make_task(project, "click-link", split="eval")
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    kept = make_finished_episode(project, held_out, steps=[{}, {}], reward=1.0)
    snapshot = build(project, "sft", split="eval")
    assert snapshot.rows == 2 and snapshot.lineage["tasks"] == {"click-link": 2}
    assert build(project, "sft", tasks=[held_out.pk]).lineage["episodes"] == 1
    assert {r["meta"]["episode_id"] for r in export.snapshot_preview(snapshot, 10)} == {kept.pk}


def test_empty_and_invalid_snapshots_are_refused_with_a_message(demo):
    client = client_for(demo["manager"])
    url = f"/api/v1/projects/{demo['project'].pk}/snapshots/"
    empty = client.post(url, {"kind": "sft"}, format="json")
    assert empty.status_code == 400 and "No sft rows match" in empty.json()["detail"]
    make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)
    for body, field in [({"kind": "sft", "filter": {"colour": "red"}}, "filter"),
                        ({"kind": "sft", "filter": {"created_after": "yesterday"}}, "created_after"),
                        ({"kind": "sft", "filter": {"tasks": [999999]}}, "tasks"),
                        ({"kind": "xyz"}, "kind")]:
        response = client.post(url, body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["errors"], response.json()
    assert not DatasetSnapshot.objects.exists()


def test_a_snapshot_name_is_kept_whole_up_to_its_limit_and_refused_past_it_never_cut(demo):
    client = client_for(demo["manager"])
    url = f"/api/v1/projects/{demo['project'].pk}/snapshots/"
    make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)
    name = "s" * (LIMITS["snapshot_name"] - 1) + "!"
    for long in (name + "?", "n" * 5000):
        response = client.post(url, {"kind": "sft", "name": long}, format="json")
        assert response.status_code == 400
        assert f"The snapshot name is {len(long):,} characters long" in response.json()["errors"]["name"][0]
    with pytest.raises(ApplicationError) as refused:  # the service refuses too: no path cuts
        snapshots.snapshot_create(project=demo["project"], kind="sft", name="n" * 5000, build=False)
    assert list(refused.value.errors) == ["name"]
    assert not DatasetSnapshot.objects.exists()
    made = client.post(url, {"kind": "sft", "name": name}, format="json")
    assert made.status_code == 202 and DatasetSnapshot.objects.get().name == name


def test_annotators_cannot_see_routing_snapshots_or_exports(demo):
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    snapshot = build(project, "sft")
    annotator, outsider = client_for(demo["annotator"]), client_for(demo["outsider"])
    urls = [f"/api/v1/projects/{project.pk}/routing", f"/api/v1/projects/{project.pk}/snapshots/",
            f"/api/v1/snapshots/{snapshot.pk}/", f"/api/v1/snapshots/{snapshot.pk}/rows",
            f"/api/v1/snapshots/{snapshot.pk}/export", f"/api/v1/projects/{project.pk}/dashboard",
            f"/api/v1/projects/{project.pk}/agreement"]
    for url in urls:
        assert annotator.get(url).status_code == 403, url
        assert outsider.get(url).status_code == 404, url
    assert annotator.post(f"/api/v1/projects/{project.pk}/snapshots/", {"kind": "sft"}, format="json").status_code == 403
    assert annotator.patch(f"/api/v1/projects/{project.pk}/routing", {"rule": "review"}, format="json").status_code == 403
    assert client_for(demo["manager"]).get(urls[0]).status_code == 200


def test_routing_api_changes_the_rule_and_reports_buckets(demo):
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}, EDITED], mode="supervised", reward=0.2)
    client = client_for(demo["manager"])
    url = f"/api/v1/projects/{project.pk}/routing"
    assert client.get(url).json()["buckets"]["ct"]["rows"] == 2
    changed = client.patch(url, {"reward_threshold": 0.1}, format="json").json()
    assert changed["reward_threshold"] == 0.1 and changed["buckets"]["sft"]["rows"] == 2
    assert changed["buckets"]["dpo"]["rows"] == 1
    assert client.patch(url, {"rule": "vibes"}, format="json").status_code == 400


@pytest.mark.parametrize("threshold", [-3, 7, 1.0001, "NaN", "Infinity"])
def test_a_reward_threshold_outside_0_to_1_is_refused_with_a_reason(demo, threshold):
    url = f"/api/v1/projects/{demo['project'].pk}/routing"
    response = client_for(demo["manager"]).patch(url, {"reward_threshold": threshold}, format="json")
    assert response.status_code == 400 and "reward_threshold" in response.json()["errors"], response.json()
    if not isinstance(threshold, str):
        with pytest.raises(ApplicationError, match="from 0 to 1"):
            buckets.routing_set(project=demo["project"], actor=demo["manager"], reward_threshold=threshold)
    assert buckets.routing_of(demo["project"])["reward_threshold"] == 0.5


def test_freezing_the_same_data_twice_makes_one_snapshot_and_new_data_a_new_one(demo):
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    client, url = client_for(demo["manager"]), f"/api/v1/projects/{project.pk}/snapshots/"
    first = client.post(url, {"kind": "sft"}, format="json")
    again = client.post(url, {"kind": "sft", "name": "double click"}, format="json")
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"] and again.json()["duplicate"] is True
    snapshots.snapshot_build(snapshot_id=first.json()["id"])
    assert client.post(url, {"kind": "sft"}, format="json").json()["id"] == first.json()["id"]  # ready: still it
    assert client.post(url, {"kind": "sft", "filter": {"split": "train"}}, format="json").status_code == 202
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    newer = client.post(url, {"kind": "sft"}, format="json")
    assert newer.status_code == 202 and newer.json()["id"] != first.json()["id"]
    assert DatasetSnapshot.objects.filter(project=project, kind="sft").count() == 3


@pytest.mark.django_db(transaction=True)
def test_two_freezes_at_the_same_moment_make_one_snapshot(demo):
    import threading

    from django.db import connection

    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    barrier, made = threading.Barrier(2), []

    def freeze():
        try:
            barrier.wait()
            made.append(snapshots.snapshot_create(project=project, kind="sft", build=False).pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=freeze) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 2 and made[0] == made[1]
    assert DatasetSnapshot.objects.filter(project=project).count() == 1


def test_a_build_reports_its_start_and_rising_progress(demo, monkeypatch):
    seen = []
    real = snapshots._Progress.__call__

    def spy(self, value, force=False):
        seen.append(round(value, 3))
        return real(self, value, force=True)

    monkeypatch.setattr(snapshots._Progress, "__call__", spy)
    for _ in range(3):
        make_finished_episode(demo["project"], demo["task"], steps=[{}, {}], reward=1.0)
    snapshot = build(demo["project"], "sft")
    assert snapshot.status == SnapshotStatus.READY and snapshot.started_at is not None
    assert seen == sorted(seen) and len(seen) >= 4 and seen[-1] >= 0.95, seen


def test_snapshot_create_command_writes_a_snapshot(demo, capsys):
    make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)
    call_command("snapshot_create", demo["project"].slug, "sft", "--name", "nightly")
    printed = json.loads(capsys.readouterr().out)
    snapshot = DatasetSnapshot.objects.get(pk=printed["id"])
    assert snapshot.name == "nightly" and snapshot.status == "ready" and printed["rows"] == snapshot.rows == 1


def test_snapshot_built_by_the_worker_reports_progress_until_ready(celery_worker, demo):
    from tests.stack import wait_for

    for _ in range(2):
        make_finished_episode(demo["project"], demo["task"], steps=[{}], reward=1.0)
    client = client_for(demo["manager"])
    created = client.post(f"/api/v1/projects/{demo['project'].pk}/snapshots/", {"kind": "sft", "name": "w"}, format="json")
    assert created.status_code == 202 and created.json()["status"] == "building"
    url = f"/api/v1/snapshots/{created.json()['id']}/"
    wait_for(lambda: client.get(url).json()["status"] != "building", timeout=60, what="the snapshot job")
    body = client.get(url).json()
    assert body["status"] == "ready" and body["progress"] == 1.0 and body["rows"] == 2, body


def test_a_manager_trains_on_a_ready_snapshot_and_gets_a_checkpoint(celery_worker, demo, tmp_path):
    from tests.stack import wait_for

    for _ in range(2):
        make_finished_episode(demo["project"], demo["task"], steps=[{}, EDITED], mode="supervised", reward=1.0)
    snapshot = build(demo["project"], "dpo")
    client, url = client_for(demo["manager"]), f"/api/v1/projects/{demo['project'].pk}/runs/"
    refused = client.post(url, {"snapshot": snapshot.pk}, format="json")  # nothing deployed: nothing to train on
    assert refused.status_code == 409 and refused.json()["detail"].startswith(
        "No trained checkpoint to start from: nothing with weights is deployed in this project"), refused.json()
    from training import deployments
    from trainer.model import save_tiny_untrained

    v0 = deployments.checkpoint_register(project=demo["project"], name="v0",
                                         uri=str(save_tiny_untrained(tmp_path / "v0")))
    deployments.deployment_promote(project=demo["project"], checkpoint=v0, reason="test")
    assert client.post(url, {"snapshot": snapshot.pk, "algorithm": "sft"}, format="json").status_code == 400
    assert client_for(demo["annotator"]).post(url, {"snapshot": snapshot.pk}, format="json").status_code == 403
    assert client.post(url, {"snapshot": snapshot.pk, "max_epochs": -1}, format="json").status_code == 400
    created = client.post(url, {"snapshot": snapshot.pk, "max_steps": 40}, format="json")
    assert created.status_code == 202 and created.json()["algorithm"] == "dpo", created.json()
    assert created.json()["config"]["stages"][0]["max_epochs"] == 5  # the default guard

    def finished():
        runs = client.get(url).json()["results"]
        return runs[0]["status"] in ("succeeded", "failed") and runs[0]

    run = wait_for(finished, timeout=180, what="the training run")
    assert run["status"] == "succeeded", (run["error"], run["log_tail"])
    assert run["checkpoint"] is not None and run["snapshot"] == snapshot.pk and run["metrics"]
    # 40 steps on 2 pairs would memorise them: the run stopped after 5 passes, and says so
    assert run["metrics"][-1]["total"] < 40
    [warning] = run["warnings"]
    assert "not 40: that is 5 passes over the 2 pairs" in warning, warning


def test_rft_counts_the_autonomous_successes_among_the_sft_rows(demo):
    project, task = demo["project"], demo["task"]
    make_finished_episode(project, task, steps=[{}, {}], reward=1.0)
    make_finished_episode(project, task, steps=[{}, EDITED], mode="supervised", reward=1.0)
    counts = buckets.buckets(project)
    assert counts["sft"]["rows"] == 4 and counts["rft"] == {"rows": 2, "episodes": 1, "new_rows": 2}
    build(project, "sft")
    assert buckets.buckets(project)["rft"]["new_rows"] == 0


# --- rows rendered for the deployed checkpoint (agent/rows.py) ----------------------------------------------------
def _supervised_rollout(project, task):
    """A supervised episode recorded as the rollout worker records one, acted by a text policy of the tiny model's
    named style: step 0 approved, step 1 edited (the proposal clicked the corner), step 2's first proposal rejected
    (the corner again) and the second approved."""
    from agent.actions import Turn
    from agent.envs.base import Element, Env, Observation, StepResult
    from agent.policies.base import PolicyOutput
    from agent.rollout import Decision, Supervisor, run_episode
    from rollouts import episodes
    from rollouts.models import Episode
    from rollouts.worker import record_rejection, record_step
    from tests.factories import jpeg

    class Screens(Env):
        def reset(self, task, seed):
            self.n = 0
            return self.observe()

        def observe(self):
            return Observation('Click on the "ok" button.', "http://127.0.0.1:9/miniwob/click-button.html",
                               jpeg(self.n), 160, 210, [Element("text", "lorem", 40, 58, 50, 10),
                                                        Element("button", "ok", 30 + 10 * self.n, 100, 20, 12)])

        def step(self, action):
            self.n += 1
            return StepResult(self.observe(), 1.0 if self.n == 3 else 0.0, self.n == 3, {})

        def close(self):
            pass

    class Policy:
        prompt_style = "named"

        def act(self, prompt, temperature=None):
            told = "Feedback:" in prompt[-1]["content"]
            text = "Thought: the ok button\nAction: click(x=50, y=100)" if told else "Thought: top left\nAction: click(x=5, y=5)"
            return PolicyOutput(text=text, token_ids=[1, 2], token_logprobs=[-0.1, -0.2])

    class Reviewer(Supervisor):
        def review(self, index, observation, proposal, attempt=1, repeated=False, **_):
            if index == 1:
                return Decision("edit", Turn("the ok button is lower", Action("click", {"x": 40, "y": 100}), None, ""))
            if index == 2 and attempt == 1:
                return Decision("reject", reason="that is the logo")
            return Decision("approve")

    from agent.actions import Action

    episode = Episode.objects.create(project=project, task=task, seed=0, mode="supervised", status="running")
    result = run_episode(Screens(), Policy(), task=task.task_name, seed=0, max_steps=5, supervisor=Reviewer(),
                         on_step=lambda record: record_step(episode, record),
                         on_reject=lambda record: record_rejection(episode, record))
    assert result.end_reason == "done", result
    return episodes.episode_finish(episode_id=episode.pk, status="finished", end_reason="done", reward=1.0, outcome="")


def _deploy(project, tmp_path, name, *, style, action_format="loupe", reads_images=False):
    """A checkpoint of that style and format deployed for ``project`` (records only: the export reads no weights)."""
    from rollouts.models import Checkpoint, Deployment

    path = tmp_path / name
    path.mkdir()
    (path / "loupe.json").write_text(json.dumps({"prompt_style": style, "action_format": action_format,
                                                 "reads_images": reads_images}))
    checkpoint = Checkpoint.objects.create(project=project, name=name, uri=str(path), action_format=action_format,
                                           reads_images=reads_images)
    Deployment.objects.filter(project=project, active=True).update(active=False)
    Deployment.objects.create(project=project, checkpoint=checkpoint, active=True)
    return checkpoint


def test_rows_for_a_uitars_reading_checkpoint_carry_screenshots_and_uitars_answers(demo, tmp_path):
    from agent import formats
    from agent.prompt import FORMAT_SYSTEM_PROMPTS
    from cycles import cycle_settings
    from trainer.vlm import read_dpo_rows, read_sft_rows

    project = demo["project"]
    episode = _supervised_rollout(project, demo["task"])
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    shots = [dataset_rows.image_path(step.screenshot) for step in steps]
    _deploy(project, tmp_path, "uitars-7b", style="full", action_format="uitars", reads_images=True)
    cycle_settings.settings_set(project=project, actor=demo["manager"], history_images=1)
    target = {"style": "full", "action_format": "uitars", "reads_images": True, "history_images": 1}

    def action_of(text):
        turn = formats.parse(text, format="uitars", width=160, height=210)
        assert turn.action is not None, text
        return turn.action.name, round(turn.action.args["x"]), round(turn.action.args["y"])

    sft = build(project, "sft")
    assert sft.lineage["rendered_for"] == target
    rows = export.snapshot_preview(sft, 10)
    assert [row["images"] for row in rows] == [shots[:1], shots[:2], shots[1:3]]  # current + 1 earlier, per user turn
    for row in rows:
        assert row["rendered_for"] == target and row["messages"][0]["content"] == FORMAT_SYSTEM_PROMPTS["uitars"]
        answers = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert [action_of(a) for a in answers] == [(s.action["name"], s.action["args"]["x"], s.action["args"]["y"])
                                                   for s in steps[:len(answers)]]  # map back to what ran
    dpo = export.snapshot_preview(build(project, "dpo"), 10)
    assert [(r["meta"]["pair"], r["meta"]["step_index"]) for r in dpo] == [("correction", 1), ("rejection", 2)]
    # the edit over the model's proposal, and the approved turn over the rejected one: all in UI-TARS' words
    assert [(action_of(r["chosen"][0]["content"]), action_of(r["rejected"][0]["content"])) for r in dpo] == [
        (("click", 40, 100), ("click", 5, 5)), (("click", 50, 100), ("click", 5, 5))]
    assert [r["images"] for r in dpo] == [shots[:2], shots[1:3]]
    assert "Feedback:" not in dpo[1]["prompt"][-1]["content"]  # the rejected proposal answered the first prompt

    # the bundle's images/ holds what the rows name, where trainer/vlm.py looks for them
    response = client_for(demo["manager"]).get(f"/api/v1/snapshots/{sft.pk}/export")
    zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))).extractall(tmp_path / "bundle")
    assert json.loads((tmp_path / "bundle" / "snapshot.json").read_text())["rendered_for"] == target
    read = read_sft_rows(tmp_path / "bundle" / "data.jsonl", "full")
    assert [len(row["images"]) for row in read] == [1, 2, 2]
    assert all(image["path"].startswith(str((tmp_path / "bundle" / "images").resolve())) for r in read for image in r["images"])


def test_rows_for_the_tiny_named_text_checkpoint_are_what_the_stored_prompts_were(demo, tmp_path):
    """Rendered from the steps' structure for the checkpoint that acted, the rows hold exactly the prompts the
    rollout stored (today's export copied them) and the turns in Loupe's grammar; no images."""
    from agent.actions import Action, format_turn

    project = demo["project"]
    episode = _supervised_rollout(project, demo["task"])
    _deploy(project, tmp_path, "tiny", style="named")
    steps = list(Step.objects.filter(episode=episode).order_by("index").prefetch_related("rejections"))
    sft = export.snapshot_preview(build(project, "sft"), 10)
    assert [row["messages"] for row in sft] == [
        [*step.prompt, {"role": "assistant", "content": format_turn(step.thought, Action.from_dict(step.action))}]
        for step in steps]
    assert all(row["images"] == [] for row in sft) and "Feedback: A person rejected" in sft[2]["messages"][-2]["content"]
    correction, rejection = export.snapshot_preview(build(project, "dpo"), 10)
    assert correction["prompt"] == steps[1].prompt and correction["rejected"][0]["content"] == steps[1].proposal["raw"]
    (stored,) = steps[2].rejections.all()
    assert rejection["prompt"] == stored.prompt and rejection["rejected"][0]["content"] == stored.raw_output
    assert rejection["rendered_for"] == {"style": "named", "action_format": "loupe", "reads_images": False,
                                         "history_images": 0}


def test_a_new_deployment_makes_a_new_snapshot_of_the_same_data(demo, tmp_path):
    project = demo["project"]
    make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    first = build(project, "sft")
    _deploy(project, tmp_path, "uitars-7b", style="full", action_format="uitars", reads_images=True)
    second = build(project, "sft")
    assert second.pk != first.pk and second.lineage["rendered_for"]["action_format"] == "uitars"


def test_a_step_without_a_screen_size_fails_the_snapshot_for_a_uitars_checkpoint_saying_which(demo, tmp_path):
    project = demo["project"]
    episode = make_finished_episode(project, demo["task"], steps=[{}], reward=1.0)
    Step.objects.filter(episode=episode).update(width=0, height=0)
    _deploy(project, tmp_path, "uitars-7b", style="full", action_format="uitars", reads_images=True)
    snapshot = build(project, "sft")
    assert snapshot.status == SnapshotStatus.FAILED
    assert snapshot.error.startswith(f"Step 0 of episode {episode.pk} cannot be written for the deployed checkpoint "
                                     "(uitars answers, full prompt, with screenshots (+0 earlier))"), snapshot.error


def test_rows_keep_a_terminals_text_and_a_persons_answer_to_call_user(demo, tmp_path):
    """What the rollout showed beyond the elements (a terminal's text) and what a person told the model (the answer
    to its call_user) are stored on the step, so rows rendered from the steps hold the prompts the model was sent."""
    from agent.actions import Action, format_turn
    from agent.envs.base import Env, Observation, StepResult
    from agent.policies.base import PolicyOutput
    from agent.rollout import Decision, Supervisor, run_episode
    from rollouts import episodes
    from rollouts.models import Episode
    from rollouts.worker import record_step
    from tests.factories import jpeg

    class Terminal(Env):
        def reset(self, task, seed):
            self.n = 0
            return self.observe()

        def observe(self):
            return Observation("Open the notes file.", "", jpeg(self.n), 160, 210, [],
                               screen_text=f"$ ls\nnotes.txt todo.txt\n(turn {self.n})")

        def step(self, action):
            self.n += 1
            return StepResult(self.observe(), 1.0 if self.n == 2 else 0.0, self.n == 2, {})

        def close(self):
            pass

    class Policy:
        prompt_style = "named"

        def act(self, prompt, temperature=None):
            if "The user answered" in prompt[-1]["content"]:
                return PolicyOutput(text='Thought: notes it is\nAction: type(text="cat notes.txt\\n")')
            return PolicyOutput(text='Thought: two files\nAction: call_user(question="Which file?")')

    class Reviewer(Supervisor):
        def review(self, index, observation, proposal, attempt=1, repeated=False, **_):
            return Decision("approve")

        def answer_call_user(self, index, question):
            return "the notes one"

    project = demo["project"]
    episode = Episode.objects.create(project=project, task=demo["task"], seed=0, mode="supervised", status="running")
    result = run_episode(Terminal(), Policy(), task=demo["task"].task_name, seed=0, max_steps=4,
                         supervisor=Reviewer(), on_step=lambda record: record_step(episode, record))
    assert result.end_reason == "done", result
    episodes.episode_finish(episode_id=episode.pk, status="finished", end_reason="done", reward=1.0, outcome="")
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [s.feedback for s in steps] == ["", "The user answered: the notes one"]
    assert steps[1].screen_text == "$ ls\nnotes.txt todo.txt\n(turn 1)"
    _deploy(project, tmp_path, "tiny", style="named")
    sft = [row for row in export.snapshot_preview(build(project, "sft"), 10) if row["meta"]["episode_id"] == episode.pk]
    assert [row["messages"] for row in sft] == [
        [*step.prompt, {"role": "assistant", "content": format_turn(step.thought, Action.from_dict(step.action))}]
        for step in steps]
    assert "(turn 1)" in sft[1]["messages"][-2]["content"] and "The user answered" in sft[1]["messages"][-2]["content"]


def test_rl_rows_for_a_reading_checkpoint_are_grpo_steps_whose_env_reward_replays_the_actions_before(demo, tmp_path):
    from agent.actions import Action
    from agent.rows import GRPORow
    from training import trainer_process
    from trainer.grpo import read_rows
    from trainer.rewards import EnvReward

    project, task = demo["project"], demo["task"]
    clicks = [{"action": {"name": "click", "args": {"x": 3 + i, "y": 4}}} for i in range(3)]
    episode = make_finished_episode(project, task, steps=[clicks[0], {"action": None}, clicks[1], clicks[2]])
    make_finished_episode(project, task, steps=[EDITED], mode="supervised")  # a person acted: no RL rows
    assert buckets.buckets(project)["rl"]["rows"] == 4  # one row a step, for a text target too
    _deploy(project, tmp_path, "uitars-7b", style="full", action_format="uitars", reads_images=True)
    assert buckets.buckets(project)["rl"] == {"rows": 4, "episodes": 1, "new_rows": 4}  # one row a step

    snapshot = build(project, "rl")
    assert snapshot.status == SnapshotStatus.READY and snapshot.rows == 4, snapshot.error
    rows = [GRPORow.from_dict(row, f"row {i}") for i, row in enumerate(export.snapshot_preview(snapshot, 10))]
    steps = list(Step.objects.filter(episode=episode).order_by("index"))
    assert [row.meta["step_index"] for row in rows] == [0, 1, 2, 3] and [r.meta["void"] for r in rows] == [
        False, True, False, False]
    done = ["click(x=3, y=4)", "click(x=4, y=4)"]
    assert [row.reward["prefix"] for row in rows] == [[], done[:1], done[:1], done]  # the void turn ran nothing
    for row, step in zip(rows, steps):
        assert row.reward == {"kind": "env", "env": "miniwob", "task": task.task_name, "seed": episode.seed,
                              "prefix": row.reward["prefix"]}
        assert row.messages[-1]["role"] == "user" and row.images == [dataset_rows.image_path(step.screenshot)]
        assert (row.format, row.width, row.height) == ("uitars", 16, 16) and row.rendered_for.reads_images
    assert "start_box=" in rows[3].messages[-2]["content"]  # the history is written in the reader's format

    with trainer_process.snapshot_local(snapshot) as path:  # laid out for the trainer, which reads them
        prompts, scored = read_rows(path, style="full", action_format="uitars")
        assert [p["images"][0]["path"] for p in prompts] == [str((path.parent / r.images[0]).resolve()) for r in rows]
        assert scored[4].reward == EnvReward("miniwob", task.task_name, episode.seed,
                                             tuple(Action.from_dict(c["action"]) for c in clicks[:2]))
        with pytest.raises(Exception, match=r"data.jsonl:1: the rows were rendered for uitars answers but the init "
                                            r"checkpoint answers in loupe"):
            read_rows(path, style="full", action_format="loupe")


def test_a_branchs_copies_of_its_parents_steps_make_no_rows_of_their_own(demo):
    """A branch stores its replayed prefix as copies of the parent's steps (info.replayed_from, rollouts/episodes.py);
    they are the parent's rows already. Counts and rows leave them out; the branch's own steps still make rows."""
    from rollouts.models import Episode

    project, task = demo["project"], demo["task"]
    parent = make_finished_episode(project, task, steps=[EDITED, {}], mode="supervised", reward=1.0)
    branch = make_finished_episode(project, task, steps=[EDITED, {}, {}], mode="supervised", reward=1.0)
    Episode.objects.filter(pk=branch.pk).update(parent=parent, branched_at=1)
    Step.objects.filter(episode=branch, index=0).update(info={"replayed_from": {"episode": parent.pk, "step": 0}})
    counts = buckets.buckets(project)
    assert counts["sft"]["rows"] == 2 + 2 and counts["dpo"]["rows"] == 1  # the branch's copied edit is no pair
    sft = export.snapshot_preview(build(project, "sft"), 10)
    assert sorted((row["meta"]["episode_id"], row["meta"]["step_index"]) for row in sft) == [
        (parent.pk, 0), (parent.pk, 1), (branch.pk, 1), (branch.pk, 2)]
    dpo = export.snapshot_preview(build(project, "dpo"), 10)
    assert [(row["meta"]["episode_id"], row["meta"]["step_index"]) for row in dpo] == [(parent.pk, 0)]
