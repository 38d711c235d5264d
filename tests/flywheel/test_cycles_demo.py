"""The flywheel demonstration (`make flywheel`): simulated annotators supervise episodes through the same REST and
WebSocket API the browser uses; their data is routed, snapshotted, trained on, evaluated on held-out seeds and
deployed, twice. Each promotion raises the deployed checkpoint's eval success rate, and the episodes started after
a deployment record the new checkpoint. Prints its figures as JSON."""
import json
import time

import pytest

from flywheel.simulated_annotators import Api, annotate, cycle_figures, cycle_run
from tests.factories import PASSWORD, make_member, make_project, make_tiny_checkpoint, make_user
from tests.stack import start_worker, stack_env, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.flywheel, pytest.mark.slow,
              pytest.mark.timeout(3600)]

EPISODES_PER_PHASE = 24  # split between the two annotators
EVAL_SEEDS = 10
RECIPE = [{"algorithm": "sft", "max_steps": 200, "lr": 0.003}, {"algorithm": "dpo", "max_steps": 10}]


@pytest.fixture(scope="module")
def workers(module_stack, tmp_path_factory):
    """As `make run` starts them: live work (rollouts, default) with two processes, training on its own."""
    stack, path = module_stack
    env = stack_env(LOUPE_CHECKPOINT_DIR=tmp_path_factory.mktemp("checkpoints"))
    start_worker(stack, path, env, queues="live,rollouts,default", name="live", concurrency=2)
    start_worker(stack, path, env, queues="train", name="train", concurrency=1)


def test_two_cycles_of_simulated_annotation_raise_the_deployed_success_rate(daphne_server, workers, tmp_path):
    project = make_project("Flywheel demo")
    make_member(project, make_user("lead"), "manager")
    for name in ("ann1", "ann2"):
        make_member(project, make_user(name), "annotator")
    make_tiny_checkpoint(project, tmp_path / "untrained")  # the flywheel starts from an untrained policy

    manager, pid = Api(daphne_server, "lead", PASSWORD), project.pk
    tasks = {}
    for name in ("click-test", "focus-text"):
        tasks[name] = manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "task_name": name, "split": "train", "seed_start": 0, "seed_end": 99_999, "max_steps": 3})
        manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "task_name": name, "split": "eval", "seed_start": 100_000, "seed_end": 100_099, "max_steps": 2})
    manager.call("PATCH", f"/api/v1/projects/{pid}/routing", {"rule": "reward", "reward_threshold": 0.5})
    manager.call("PATCH", f"/api/v1/projects/{pid}/cycle-settings", {
        "min_new_rows": EPISODES_PER_PHASE, "recipe": RECIPE, "eval_seeds": EVAL_SEEDS, "margin": 0.05})

    report, deployed_rates = [], []
    # first the click test only; then a new task comes in (focus-text) beside more of the click test, where the
    # model of cycle 1 now proposes steps the annotators approve or edit
    phases = [[("click-test", EPISODES_PER_PHASE)], [("click-test", EPISODES_PER_PHASE // 3),
                                                     ("focus-text", EPISODES_PER_PHASE - EPISODES_PER_PHASE // 3)]]
    for phase, work in enumerate(phases):
        started, sessions = time.monotonic(), []
        for task, count in work:
            seeds = list(range(phase * 1000, phase * 1000 + count))
            sessions += annotate(daphne_server, ["ann1", "ann2"], PASSWORD, pid, tasks[task], seeds)
        spent = time.monotonic() - started
        expected = "untrained" if phase == 0 else "c1"
        assert {s.checkpoint for s in sessions} == {expected}, [s.checkpoint for s in sessions]
        cycle = cycle_run(manager, pid)
        report.append(cycle_figures(cycle, sessions, spent))
        print("FLYWHEEL", json.dumps(report[-1]))
        assert cycle["state"] == "deployed", (cycle["decision"], cycle["error"], cycle["log_tail"][-2000:])
        numbers = report[-1]
        assert numbers["success_after"] > numbers["success_before"] + 0.05 - 1e-9, numbers
        deployed_rates.append(numbers["success_after"])
        assert manager.call("GET", f"/api/v1/projects/{pid}/deployments/")["results"][0]["checkpoint"]["name"] == \
            f"c{phase + 1}"

    # the deployed checkpoint's success rate rose at each promotion, each time on the held-out seeds
    assert report[0]["success_before"] < deployed_rates[0] < deployed_rates[1], report
    assert report[1]["success_before"] == pytest.approx(deployed_rates[0], abs=1e-9)  # same seeds, greedy: same number
    # and the next episode runs on the newest checkpoint, with no restart of any worker
    after = annotate(daphne_server, ["ann1"], PASSWORD, pid, tasks["click-test"], [5000])
    assert after[0].checkpoint == "c2"
    print("FLYWHEEL-SUMMARY", json.dumps({"cycles": report, "deployed_success": [report[0]["success_before"],
                                                                                 *deployed_rates]}))
    worker_quiet(timeout=120)
