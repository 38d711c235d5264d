"""Did the next checkpoint learn it: a cycle's candidate, trained on a known set of corrections, is asked each
corrected step of its training rows and validation split again; the shares per task and kind reach the cycle's API,
the gate's report, each step's API and the export."""
import json

import pytest
from rest_framework.test import APIClient

from cycles import cycle_settings
from cycles.learned import correction_kind, same_action
from rollouts.models import CorrectionReplay
from rollouts.models import Rejection, Step
from training.models import TrainingRun
from tests.cycles.test_cycles import (cycle_worker, flywheel_project, scripted_demonstrations,  # noqa: F401
                                        wait_cycle)
from tests.factories import make_task

BUTTON = {"role": "button", "text": "OK", "x": 50, "y": 100, "width": 40, "height": 20}
PANEL = {"role": "div", "text": "", "x": 80, "y": 100, "width": 160, "height": 200}


def click(x, y, name="click"):
    return {"name": name, "args": {"x": x, "y": y}}


def test_learned_means_the_same_action_or_a_click_inside_the_same_element():
    assert same_action(click(50, 100), click(50, 100), [])
    assert same_action(click(65, 108), click(40, 95), [PANEL, BUTTON])  # both inside the button, the innermost
    assert not same_action(click(75, 100), click(50, 100), [PANEL, BUTTON])  # inside the panel, not the button
    assert not same_action(click(51, 100), click(50, 100), [])  # no element there: only the same point counts
    assert not same_action(click(50, 100, "double_click"), click(50, 100), [BUTTON])
    assert not same_action(None, click(50, 100), [BUTTON])  # a void answer learned nothing
    typed = {"name": "type", "args": {"text": "ls\n"}}
    assert same_action(dict(typed), typed, []) and not same_action({"name": "type", "args": {"text": "ls"}}, typed, [])


@pytest.mark.parametrize("actor, correction, rejected, kind", [
    ("edited", "action", False, "edit"), ("edited", "thought", False, None), ("human", "", False, "takeover"),
    ("human", "action", False, "takeover"), ("human", "same", False, None), ("model", "", True, "rejection"),
    ("model", "", False, None)])
def test_which_steps_are_corrections_and_of_what_kind(actor, correction, rejected, kind):
    step = Step(actor=actor, correction=correction, action=click(1, 1))
    assert correction_kind(step, rejected) == kind


def _correct(step: Step, *, actor: str, person, action: dict | None = None) -> None:
    """Make a stored scripted step a person's correction: edited (the action stays the solver's, the model's
    proposal was another) or taken over with ``action``."""
    wrong = {"thought": "wrong", "action": {"name": "type", "args": {"text": "pwd\n"}}, "raw": "", "void_reason": None}
    Step.objects.filter(pk=step.pk).update(actor=actor, proposal=wrong, correction="action", intervened_by=person,
                                           **({"action": action} if action else {}))


@pytest.mark.django_db(transaction=True)
@pytest.mark.browser
@pytest.mark.timeout(1500)  # about 2 minutes on an idle 2-core machine; far more when it is shared
def test_a_cycle_says_which_corrections_its_candidate_learned_in_training_and_held_out(flywheel_project, cycle_worker):
    fp = flywheel_project
    project = fp["project"]
    manager = APIClient()
    manager.force_authenticate(fp["manager"])
    train = make_task(project, "terminal-count", env_kind="terminal", seed_start=0, seed_end=999, max_steps=3)
    held_out = make_task(project, "terminal-count", env_kind="terminal", split="eval", seed_start=100_000,
                         seed_end=100_099, max_steps=2)
    # 8 episodes, two turns each: every step of the batch holds every row (16 rows a step, not 30, halve the training)
    scripted_demonstrations(fp, range(8), task=train)
    steps = list(Step.objects.filter(episode__task=train).order_by("episode_id", "index"))
    edits, takeover, rejected, poison = steps[0:6], steps[6], steps[7], steps[8]
    for step in edits:
        _correct(step, actor="edited", person=fp["annotator"])
    _correct(takeover, actor="human", person=fp["annotator"])
    # a rejection the next proposal answered: the step ran as the model proposed it the second time
    Rejection.objects.create(episode_id=rejected.episode_id, step_index=rejected.index, attempt=1, step=rejected,
                             prompt=rejected.prompt, raw_output="Action: type(text=\"pwd\\n\")",
                             action={"name": "type", "args": {"text": "pwd\n"}}, reason="not that")
    # one person typed what no other step does on the same screen: 1 row against 7, which the candidate won't say
    _correct(poison, actor="human", person=fp["manager"], action={"name": "type", "args": {"text": "echo xyzzy\n"}})
    # correction_weight 1: a corrected row is trained on once, not three times (23 rows a step -> 11: the same few
    # turns; which corrections were learned is what this test reads, not how much they weighed)
    cycle_settings.settings_set(project=project, actor=fp["manager"], eval_seeds=4, eval_tasks=[held_out.pk],
                                val_fraction=0.3, val_from="corrected", patience=0, correction_weight=1,
                                recipe=[{"algorithm": "sft", "max_steps": 60, "lr": 0.005, "max_epochs": 0}])
    started = manager.post(f"/api/v1/projects/{project.pk}/cycles/")
    assert started.status_code == 202, started.content
    cycle = wait_cycle(started.json()["id"], timeout=900)
    print("cycle timings", json.dumps({k: v.get("seconds") for k, v in cycle.timings.items()}))
    assert cycle.state in ("deployed", "rejected"), (cycle.error, cycle.decision)

    replays = {r.step_id: r for r in CorrectionReplay.objects.filter(cycle=cycle)}
    corrected = [*edits, takeover, rejected, poison]
    assert set(replays) == {s.pk for s in corrected}  # every corrected step, trained on or held out
    # held out: the corrected steps whose rows the split put in the validation file (which rows it takes depends on
    # the project's id, its seed: read from the file, not assumed)
    val_files = [stage["val_file"] for stage in TrainingRun.objects.get(pk=cycle.run_id).config["stages"]
                 if stage.get("val_file")]
    in_val = {json.loads(line)["meta"]["step_id"] for path in val_files for line in open(path) if line.strip()}
    held_out = {s.pk for s in corrected} & in_val
    assert held_out and {pk for pk, r in replays.items() if r.held_out} == held_out
    assert {replays[s.pk].kind for s in edits} == {"edit"} and replays[takeover.pk].kind == "takeover"
    assert replays[rejected.pk].kind == "rejection" and replays[poison.pk].kind == "takeover"
    # learned is what the candidate's answer says: the person's action, parsed in the candidate's format
    from agent import formats

    for step in corrected:
        step.refresh_from_db()
        answer = formats.parse(replays[step.pk].answer, format=cycle.candidate.action_format, width=step.width,
                               height=step.height).action
        assert replays[step.pk].learned == same_action(answer.to_dict() if answer else None, step.action,
                                                       step.elements), (step.action, replays[step.pk].answer)
    # the candidate learnt the task's turns (it was measured better than the untrained one on them) ...
    learnt = [s.pk for s in [*edits, takeover, rejected] if replays[s.pk].learned]
    assert learnt, {s.pk: (s.action, replays[s.pk].answer) for s in corrected}
    # ... but not the one correction that contradicts 7 rows of the same screen
    assert not replays[poison.pk].learned and "xyzzy" not in replays[poison.pk].answer

    body = manager.get(f"/api/v1/cycles/{cycle.pk}/").json()
    summary = body["decision_data"]["learned"]
    total = {held: [r for r in replays.values() if r.held_out == held] for held in (False, True)}
    assert summary["trained"]["corrections"] == len(total[False]) == len(corrected) - len(held_out)
    assert summary["trained"]["learned"] + summary["held_out"]["learned"] == len(learnt)
    assert [t["task"] for t in summary["by_task"]] == ["terminal-count"]
    kinds = {k["kind"]: k for k in summary["by_kind"]}
    assert kinds["edit"]["trained"]["learned"] + kinds["edit"]["held_out"]["learned"] == \
        sum(replays[s.pk].learned for s in edits)
    assert kinds["takeover"]["trained"]["corrections"] + kinds["takeover"]["held_out"]["corrections"] == 2
    assert kinds["rejection"]["trained"]["corrections"] + kinds["rejection"]["held_out"]["corrections"] == 1
    assert body["decision_data"]["decision"]["learned"] == summary
    assert "corrections trained on" in body["decision"]  # the gate's report says it

    if cycle.state == "deployed":  # the dashboard's share per person counts promoted checkpoints' corrections
        per = {r["username"]: r for r in manager.get(f"/api/v1/projects/{project.pk}/dashboard").json()[
            "corrections_learned"]}
        mine = [replays[s.pk].learned for s in [*edits, takeover]]
        assert (per[fp["annotator"].username]["corrections"], per[fp["annotator"].username]["learned"]) == \
            (7, sum(mine))
        assert (per[fp["manager"].username]["learned"], per[fp["manager"].username]["share"]) == (0, 0.0)
    step = manager.get(f"/api/v1/episodes/{poison.episode_id}/").json()["steps"][poison.index]
    assert step["learned"] == [{"cycle": cycle.pk, "learned": False, "held_out": replays[poison.pk].held_out}]
    rows = [json.loads(line) for line in episodes_rows(project, train.pk)]
    marked = {r["meta"]["step_id"]: r["meta"]["learned"] for r in rows if "learned" in r["meta"]}
    assert marked[poison.pk] == [{"cycle": cycle.pk, "learned": False, "held_out": replays[poison.pk].held_out}]
    assert marked[edits[0].pk][0]["learned"] is replays[edits[0].pk].learned


def episodes_rows(project, task_id: int):
    """The SFT export's rows (a fresh snapshot of the task, built now: not the cycle's, frozen before), as JSON
    lines."""
    from django.core.files.storage import default_storage

    from snapshots import build

    snapshot = build.snapshot_create(project=project, kind="sft", filter={"split": "train", "tasks": [task_id]}, build=False,
                                         name="after the cycle")
    snapshot = build.snapshot_build(snapshot_id=snapshot.pk)
    with default_storage.open(snapshot.file, "rb") as fh:
        return fh.read().decode().splitlines()
