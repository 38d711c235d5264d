"""What a cycle trains on (issue 23): the gate skips a cycle whose new rows cannot help, saying why; the SFT stage
mixes the new rows with a replay sample of what the deployed checkpoint learnt from (found by lineage, back to the
cold start's demonstrations), holds some new rows out for the validation loss, and DPO keeps only pairs whose
actions differ. Fast: no Celery worker; one run of the real trainer of a few steps."""
import json

import pytest

from core.errors import ApplicationError
from cycles import cycle_settings
from cycles import cycles
from snapshots import rows as dataset_rows
from snapshots import buckets
from training import deployments
from cycles import replay
from training import runs
from cycles.models import CycleState
from training.models import TrainingRun
from tests.factories import make_finished_episode, make_member, make_project, make_task, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def fp(tmp_path, settings):
    """A click-test project whose deployed v0 was produced by a cold-start run: its run directory holds the
    demonstrations (as ``python -m trainer coldstart --out`` writes them), some rendered for another model."""
    from trainer.model import save_tiny_untrained

    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    project = make_project()
    manager = make_user()
    make_member(project, manager, "manager")
    train = make_task(project, "click-test", seed_start=0, seed_end=999, max_steps=3)
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=2)
    coldstart = TrainingRun.objects.create(project=project, algorithm="sft", status="succeeded",
                                           config={"stages": [{"algorithm": "coldstart"}], "deploy_as": "v0"})
    out = runs.run_dir(coldstart)
    save_tiny_untrained(out / "checkpoint")
    v0 = deployments.checkpoint_register(project=project, name="v0", uri=str(out / "checkpoint"), produced_by=coldstart)
    deployments.deployment_promote(project=project, checkpoint=v0, reason="cold start v0")
    target = buckets.export_target(project).to_dict()
    demos = [{"messages": [{"role": "user", "content": f"Task: click {i}"},
                           {"role": "assistant", "content": f"Thought: {i}\nAction: click(x={i}, y=5)"}],
              "images": [], "meta": {"source": "solver"}, "rendered_for": target} for i in range(40)]
    demos += [{**row, "rendered_for": {**target, "style": "other"}} for row in demos[:5]]  # another model's rows
    (out / "demos.jsonl").write_text("".join(json.dumps(row) + "\n" for row in demos))
    buckets.routing_set(project=project, actor=manager, reward_threshold=0.5)
    cycle_settings.settings_set(project=project, actor=manager, min_new_rows=1, eval_seeds=2,
                                recipe=[{"algorithm": "sft", "max_steps": 4, "lr": 0.001, "batch_tokens": 4096}])
    return {"project": project, "manager": manager, "train": train, "v0": v0, "coldstart": coldstart}


def sft_episodes(fp, n, edited=0):
    """``n`` successful supervised episodes of one step; the first ``edited`` a person corrected."""
    for i in range(n):
        step = {"thought": f"reason {i}"}
        if i < edited:
            step.update(actor="edited", action={"name": "click", "args": {"x": 40 + i, "y": 20}},
                        proposal={"thought": "wrong", "action": {"name": "click", "args": {"x": 1, "y": 1}},
                                  "raw": "Thought: wrong\nAction: click(x=1, y=1)"})
        make_finished_episode(fp["project"], fp["train"], steps=[step], mode="supervised", reward=1.0)


def thought_edit(fp):
    """A person rewrote the model's thought and kept its action: a DPO pair whose actions are the same."""
    action = {"name": "click", "args": {"x": 3, "y": 20}}
    make_finished_episode(fp["project"], fp["train"], mode="supervised", reward=0.0, steps=[{
        "actor": "edited", "thought": "the better reason", "action": action,
        "proposal": {"thought": "a worse reason", "action": action,
                     "raw": "Thought: a worse reason\nAction: click(x=3, y=20)"}}])


def gate(fp, django_capture_on_commit_callbacks, **changes):
    cycle_settings.settings_set(project=fp["project"], actor=fp["manager"], **changes)
    with django_capture_on_commit_callbacks(execute=False):
        cycle = cycles.cycle_start(project=fp["project"], actor=fp["manager"])
        state = cycles.cycle_gate(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    return state, cycle


def test_the_gate_skips_too_few_rows_for_the_recipe_saying_how_many_it_needs(fp, django_capture_on_commit_callbacks):
    sft_episodes(fp, 3)
    state, cycle = gate(fp, django_capture_on_commit_callbacks, min_new_rows=3,
                        recipe=[{"algorithm": "sft", "max_steps": 5, "min_rows": 8}])
    assert state == CycleState.SKIPPED
    assert cycle.decision == ("skipped: no stage's new rows can help: sft: 3 new rows, its recipe needs at least 8 "
                              "(2 held out for validation, the rest to train on)")
    assert cycle.decision_data["gate"]["stages"]["sft"] == {"ok": False, "new": 3, "needed": 8,
                                                            "why": cycle.decision.split("help: ", 1)[1]}
    assert not cycle.snapshots.exists() and not TrainingRun.objects.filter(config__cycle=cycle.pk).exists()


def test_the_gate_skips_dpo_pairs_whose_actions_are_the_same(fp, django_capture_on_commit_callbacks):
    thought_edit(fp)
    assert buckets.buckets(fp["project"])["dpo"]["rows"] == 1  # the pair is written (it differs in the thought)
    state, cycle = gate(fp, django_capture_on_commit_callbacks, recipe=[{"algorithm": "dpo", "max_steps": 5}])
    assert state == CycleState.SKIPPED
    assert cycle.decision == ("skipped: no stage's new rows can help: dpo: none of its 1 new pairs changes the action "
                              "(edits of the thought alone); DPO would learn nothing from them")


def test_a_stage_that_cannot_help_is_dropped_and_the_others_train(fp, django_capture_on_commit_callbacks):
    sft_episodes(fp, 2)
    thought_edit(fp)
    state, cycle = gate(fp, django_capture_on_commit_callbacks,
                        recipe=[{"algorithm": "sft", "max_steps": 2}, {"algorithm": "dpo", "max_steps": 2}])
    assert state == CycleState.SNAPSHOT
    assert cycle.decision_data["gate"]["stages"]["dpo"]["ok"] is False
    with django_capture_on_commit_callbacks(execute=False):
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == CycleState.TRAIN
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"
    assert list(cycle.snapshots.values_list("kind", flat=True)) == ["sft"]
    run = TrainingRun.objects.get(config__cycle=cycle.pk)
    assert [s["algorithm"] for s in run.config["stages"]] == ["sft"]



def test_the_train_state_sends_its_run_then_itself_as_one_celery_chain(fp, django_capture_on_commit_callbacks,
                                                                       monkeypatch):
    """The run knows nothing of the cycle: the cycle composes them (the run on the train queue, then cycle_train)."""
    from celery.canvas import _chain

    sft_episodes(fp, 10)
    state, cycle = gate(fp, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == CycleState.TRAIN
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"
    sent = []
    monkeypatch.setattr(_chain, "apply_async", lambda self, *args, **kwargs: sent.append(self))
    callbacks[-1]()
    run = TrainingRun.objects.get(config__cycle=cycle.pk)
    (chain,) = sent
    assert [(task.task, tuple(task.args), task.options.get("queue")) for task in chain.tasks] == [
        ("flywheel.tasks.cycle_run", (cycle.pk, run.pk), "train"), ("flywheel.tasks.cycle_train", (cycle.pk,), None)]
    assert cycles.cycle_run(cycle_id=cycle.pk + 1000, run_id=run.pk) == "busy or moved on"  # no such cycle

def test_sft_trains_on_new_rows_with_replay_of_the_cold_start_and_a_validation_split(
        fp, django_capture_on_commit_callbacks):
    sft_episodes(fp, 10, edited=4)
    state, cycle = gate(fp, django_capture_on_commit_callbacks, replay_ratio=2.0, replay_max_rows=100,
                        val_fraction=0.15, val_min_rows=2, patience=2, correction_weight=3, val_from="new")
    assert state == CycleState.SNAPSHOT
    with django_capture_on_commit_callbacks(execute=False):
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == CycleState.TRAIN
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"
    cycle.refresh_from_db()
    mix = cycle.decision_data["data"]["sft"]
    assert {k: mix[k] for k in ("snapshot_rows", "val_rows", "train_snapshot_rows", "replay_rows", "replay_pool",
                                "replay_other_rendering")} == {
        "snapshot_rows": 10, "val_rows": 2, "train_snapshot_rows": 8, "replay_rows": 16, "replay_pool": 40,
        "replay_other_rendering": 5}
    # the rows a person corrected count three times: they are where v0 was wrong
    assert 2 <= mix["corrected_rows"] <= 4 and mix["train_rows"] == 8 + 2 * mix["corrected_rows"] + 16
    assert mix["sources"] == [{"demos": str(runs.run_dir(fp["coldstart"]) / "demos.jsonl"),
                               "run": fp["coldstart"].pk, "checkpoint": "v0", "rows": 45}]
    [stage] = TrainingRun.objects.get(config__cycle=cycle.pk).config["stages"]
    train_rows = [json.loads(line) for line in open(stage["data_file"])]
    val_rows = [json.loads(line) for line in open(stage["val_file"])]
    assert sum(row["meta"].get("source") == "solver" for row in train_rows) == 16
    assert not {json.dumps(r["messages"]) for r in val_rows} & {json.dumps(r["messages"]) for r in train_rows}
    # the same cycle draws the same sample
    snapshot = cycle.snapshots.get()
    again = replay.sft_mix(snapshot=snapshot, sources=replay.lineage_sources(fp["v0"]), out_dir=cycle_dir_again(cycle),
                           seed=cycle.project_id * 100_003 + cycle.iteration, replay_ratio=2.0, max_rows=100,
                           val_fraction=0.15, val_min_rows=2, correction_weight=3)
    assert open(again["data_file"]).read() == open(stage["data_file"]).read()

    # the real trainer: val_loss on its progress lines, and the best step's weights kept
    assert runs.run_execute(run_id=stage_run(cycle).pk) == "succeeded", stage_run(cycle).error
    run = stage_run(cycle)
    assert all("val_loss" in line for line in run.metrics)
    assert run.checkpoint.metrics["val_loss_best"] <= run.checkpoint.metrics["val_loss_first"]
    assert run.checkpoint.metrics["rows"] == mix["train_rows"] and "--val-data" in run.log and "--patience 2" in run.log


def test_validation_reads_held_out_corrections_and_replayed_rows_and_trains_on_neither(
        fp, django_capture_on_commit_callbacks):
    sft_episodes(fp, 12, edited=6)
    state, cycle = gate(fp, django_capture_on_commit_callbacks, replay_ratio=2.0, replay_max_rows=100,
                        val_fraction=0.2, val_min_rows=2, patience=2, correction_weight=3)  # val_from: the default
    assert cycle.config["val_from"] == "corrected"
    with django_capture_on_commit_callbacks(execute=False):
        cycles.cycle_snapshot(cycle_id=cycle.pk)
        cycles.cycle_train(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    mix = cycle.decision_data["data"]["sft"]
    # 12 new rows: 2 would be held out (20 %); of the 6 corrected, round(6 * 0.2) = 1 is, with 2 replayed rows
    assert {k: mix[k] for k in ("val_from", "val_corrected_rows", "val_replay_rows", "val_rows",
                                "train_snapshot_rows", "corrected_rows")} == {
        "val_from": "corrected", "val_corrected_rows": 1, "val_replay_rows": 2, "val_rows": 3,
        "train_snapshot_rows": 11, "corrected_rows": 5}
    assert mix["replay_rows"] == 22 and mix["train_rows"] == 11 + 2 * 5 + 22
    [stage] = TrainingRun.objects.get(config__cycle=cycle.pk).config["stages"]
    train_rows = [json.loads(line) for line in open(stage["data_file"])]
    val_rows = [json.loads(line) for line in open(stage["val_file"])]
    assert sorted((r["meta"].get("actor") or r["meta"].get("source")) for r in val_rows) == ["edited", "solver", "solver"]
    assert not {json.dumps(r["messages"]) for r in val_rows} & {json.dumps(r["messages"]) for r in train_rows}


def test_too_few_corrections_to_hold_one_out_fall_back_to_a_sample_of_the_new_rows(fp, django_capture_on_commit_callbacks):
    sft_episodes(fp, 10, edited=3)  # every one of 3 corrections is trained on
    state, cycle = gate(fp, django_capture_on_commit_callbacks, val_fraction=0.2, val_min_rows=2)
    with django_capture_on_commit_callbacks(execute=False):
        cycles.cycle_snapshot(cycle_id=cycle.pk)
        cycles.cycle_train(cycle_id=cycle.pk)
    cycle.refresh_from_db()
    mix = cycle.decision_data["data"]["sft"]
    assert (mix["val_from"], mix["val_rows"], mix["val_replay_rows"]) == ("new", 2, 0)
    with pytest.raises(ApplicationError) as refused:
        cycle_settings.settings_set(project=fp["project"], actor=fp["manager"], val_from="approved")
    assert list(refused.value.errors) == ["val_from"]


def cycle_dir_again(cycle):
    return cycles.cycle_dir(cycle) / "again"


def stage_run(cycle):
    return TrainingRun.objects.select_related("checkpoint").get(config__cycle=cycle.pk)


def test_lineage_walks_back_through_cycle_runs_to_the_cold_start(fp, tmp_path):
    from trainer.model import save_tiny_untrained

    run = TrainingRun.objects.create(project=fp["project"], algorithm="sft+dpo", status="succeeded",
                                     init_checkpoint=fp["v0"], config={"stages": [
                                         {"algorithm": "sft", "snapshot": 77}, {"algorithm": "dpo", "snapshot": 78}]})
    save_tiny_untrained(tmp_path / "c1")
    c1 = deployments.checkpoint_register(project=fp["project"], name="c1", uri=str(tmp_path / "c1"),
                                         parent=fp["v0"], produced_by=run)
    assert [(s.get("snapshot") or "demos", s["checkpoint"]) for s in replay.lineage_sources(c1)] == [
        (77, "c1"), ("demos", "v0")]
    assert replay.lineage_sources(None) == []


def test_replay_and_validation_settings_are_validated(fp):
    for changes, field in [({"replay_ratio": -1}, "replay_ratio"), ({"correction_weight": 0}, "correction_weight"),
                           ({"replay_ratio": True}, "replay_ratio"),
                           ({"val_fraction": 0.9}, "val_fraction"), ({"replay_max_rows": 0}, "replay_max_rows"),
                           ({"val_fraction": 0, "patience": 3}, "patience"),
                           ({"recipe": [{"algorithm": "sft", "min_rows": 0}]}, "recipe"),
                           ({"recipe": [{"algorithm": "rl", "batch_tokens": 512}]}, "recipe")]:
        with pytest.raises(ApplicationError) as caught:
            cycle_settings.settings_set(project=fp["project"], actor=fp["manager"], **changes)
        assert field in caught.value.errors, (changes, caught.value.errors)
        [message] = caught.value.errors[field]  # shown beside its field on the page, as a sentence
        assert message[0].isupper() and caught.value.message == f"{field}: {message[0].lower()}{message[1:]}"
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(fp["manager"])
    body = client.patch(f"/api/v1/projects/{fp['project'].pk}/cycle-settings", {
        "replay_ratio": 1.5, "val_fraction": 0.2, "patience": 4,
        "recipe": [{"algorithm": "sft", "max_steps": 50, "batch_tokens": 1024, "min_rows": 6}]}, format="json")
    assert body.status_code == 200, body.content
    assert (body.json()["replay_ratio"], body.json()["val_fraction"], body.json()["patience"]) == (1.5, 0.2, 4)
    assert body.json()["recipe"][0]["min_rows"] == 6 and body.json()["recipe"][0]["batch_tokens"] == 1024


def test_a_simulated_correction_quotes_the_right_line_when_the_model_quoted_one():
    from agent.actions import Action, Turn
    from agent.envs.base import Element, Observation
    from demo.simulated_annotators import corrected_thought

    button = Element(role="button", text="cancel", x=29, y=106, width=40, height=20)
    observation = Observation(instruction='Click on the "cancel" button.', url="/x.html", screenshot=b"",
                              elements=[button], width=160, height=210)
    solver = Turn(thought='The instruction asks for the "cancel" button; I click it.',
                  action=Action("click", {"x": 29, "y": 106}), void_reason=None, raw="")
    wrong = 'The instruction asks for the "cancel" button; I click it. [button] "cancel" x=106, y=29'
    assert corrected_thought(wrong, solver, observation, "named") == (
        'The instruction asks for the "cancel" button; I click it. [button] "cancel" x=29, y=106')
    # a model that quotes nothing gets the solver's thought as it is
    assert corrected_thought("I click somewhere.", solver, observation, "named") == solver.thought


def test_a_reading_checkpoints_cycle_mixes_and_holds_out_rows_with_their_screenshots_beside_them(
        tmp_path, settings, django_capture_on_commit_callbacks):
    """Item 5 of issue 34: a checkpoint that reads screenshots gets the text recipe's validation split and replay,
    its rows' images laid out beside the stage's files (they were trained on the snapshot as it was)."""
    from trainer.tiny_vlm import save_tiny_vlm

    settings.LOUPE_CHECKPOINT_DIR = tmp_path / "checkpoints"
    project, manager = make_project(), make_user()
    make_member(project, manager, "manager")
    train = make_task(project, "click-test", seed_start=0, seed_end=999, max_steps=3)
    make_task(project, "click-test", split="eval", seed_start=100_000, seed_end=100_099, max_steps=2)
    vlm = deployments.checkpoint_register(project=project, name="vlm", uri=str(save_tiny_vlm(tmp_path / "vlm")),
                                          reads_images=True)  # Loupe's answers: the factory's clicks fall off 16x16
    deployments.deployment_promote(project=project, checkpoint=vlm, reason="test")
    buckets.routing_set(project=project, actor=manager, reward_threshold=0.5)
    fp = {"project": project, "manager": manager, "train": train}
    sft_episodes(fp, 10, edited=4)
    state, cycle = gate(fp, django_capture_on_commit_callbacks, min_new_rows=1, val_fraction=0.2, val_min_rows=2,
                        val_from="new", recipe=[{"algorithm": "sft", "max_steps": 2}])
    assert state == CycleState.SNAPSHOT
    with django_capture_on_commit_callbacks(execute=False):
        assert cycles.cycle_snapshot(cycle_id=cycle.pk) == CycleState.TRAIN
        assert cycles.cycle_train(cycle_id=cycle.pk) == "training"
    cycle.refresh_from_db()
    mix = cycle.decision_data["data"]["sft"]
    assert mix["val_rows"] == 2 and mix["train_snapshot_rows"] == 8 and mix["images"] == 10
    [stage] = TrainingRun.objects.get(config__cycle=cycle.pk).config["stages"]
    assert stage["val_file"] and stage["patience"] == cycle.config["patience"]
    for file in (stage["data_file"], stage["val_file"]):
        rows = [json.loads(line) for line in open(file)]
        names = [name for row in rows for name in row["images"]]
        assert names and all(name.startswith("images/") for name in names)
        from pathlib import Path

        assert all((Path(file).parent / name).is_file() for name in names)  # what trainer/vlm.py resolves

    # a replayed row's screenshot is found in the lineage snapshot it came from; one no snapshot holds is refused
    snapshot = cycle.snapshots.get()
    other = make_project()
    make_finished_episode(other, make_task(other, "click-test"), steps=[{}], mode="supervised")
    from snapshots import build as snapshot_service
    from snapshots import export

    earlier = snapshot_service.snapshot_build(snapshot_id=snapshot_service.snapshot_create(
        project=other, kind="sft", build=False).pk)
    [earlier_name] = list(export.screenshot_names(earlier))
    out = tmp_path / "mix"
    out.mkdir()
    (out / "rows.jsonl").write_text(json.dumps({"images": [dataset_rows.image_path(earlier_name)]}) + "\n")
    assert replay.place_images(files=[str(out / "rows.jsonl")], snapshots=[snapshot, earlier], out_dir=out) == 1
    (out / "rows.jsonl").write_text(json.dumps({"images": ["images/nowhere.jpg"]}) + "\n")
    with pytest.raises(ValueError, match="in none of their snapshots, e.g. images/nowhere.jpg"):
        replay.place_images(files=[str(out / "rows.jsonl")], snapshots=[snapshot, earlier], out_dir=out)
