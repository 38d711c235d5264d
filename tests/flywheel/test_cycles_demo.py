"""The flywheel demonstration (`make flywheel`): simulated annotators supervise episodes through the same REST and
WebSocket API the browser uses; their data is routed, snapshotted, trained on, evaluated on held-out seeds and
deployed, twice. Each promotion raises the deployed checkpoint's eval success rate, and the episodes started after
a deployment record the new checkpoint. Prints its figures as JSON."""
import json
import threading
import time

import pytest

from flywheel.simulated_annotators import Api, SimulatedAnnotator
from tests.factories import PASSWORD, make_member, make_project, make_tiny_checkpoint, make_user
from tests.stack import start_worker, stack_env, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.flywheel, pytest.mark.slow]

EPISODES_PER_PHASE = 24  # split between the two annotators
EVAL_SEEDS = 10
RECIPE = [{"algorithm": "sft", "max_steps": 200, "lr": 0.003}, {"algorithm": "dpo", "max_steps": 10}]


@pytest.fixture(scope="module")
def workers(module_stack, tmp_path_factory):
    """As `make run` starts them: live work (rollouts, default) with two processes, training on its own."""
    stack, path = module_stack
    env = stack_env(LOUPE_CHECKPOINT_DIR=tmp_path_factory.mktemp("checkpoints"))
    start_worker(stack, path, env, queues="rollouts,default", name="live", concurrency=2)
    start_worker(stack, path, env, queues="train", name="train", concurrency=1)


def annotate(base: str, annotators: list[str], project_id: int, task: dict, seeds: list[int]) -> list:
    """Each annotator (a thread with its own browser) supervises its share of the seeds."""
    reports, errors = [], []

    def work(username: str, mine: list[int]):
        person = SimulatedAnnotator(base, username, PASSWORD)
        try:
            for seed in mine:
                reports.append(person.supervise(project_id, task["id"], task["task_name"], seed))
        except Exception as exc:  # surfaced below, with the thread's story
            errors.append(f"{username}: {exc!r}")
        finally:
            person.close()

    threads = [threading.Thread(target=work, args=(name, seeds[i::len(annotators)]))
               for i, name in enumerate(annotators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return reports


def run_cycle(manager: Api, project_id: int, timeout: float = 1800) -> dict:
    cycle = manager.call("POST", f"/api/v1/projects/{project_id}/cycles/")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cycle = manager.call("GET", f"/api/v1/cycles/{cycle['id']}/")
        if cycle["state"] in ("deployed", "rejected", "skipped", "failed"):
            return cycle
        time.sleep(2)
    raise AssertionError(f"cycle {cycle['iteration']} still {cycle['state']} after {timeout} s")


def figures(cycle: dict, reports: list, annotate_seconds: float) -> dict:
    rates = {e["role"]: e for e in cycle["evaluations"]}
    return {
        "iteration": cycle["iteration"], "state": cycle["state"], "decision": cycle["decision"],
        "success_before": rates["deployed"]["success_rate"], "success_after": rates["candidate"]["success_rate"],
        "per_task_after": {t: v["success_rate"] for t, v in rates["candidate"]["per_task"].items()},
        "eval_episodes": rates["candidate"]["episodes"],
        "seconds_by_state": {state: t.get("seconds") for state, t in cycle["timings"].items()},
        "cycle_seconds": round(sum(t.get("seconds") or 0 for t in cycle["timings"].values()), 1),
        "rows": {s["kind"]: s["rows"] for s in cycle["snapshots"]},
        "annotation": {"episodes": len(reports), "approved": sum(r.approved for r in reports),
                       "edited": sum(r.edited for r in reports), "took_over": sum(r.took_over for r in reports),
                       "successes": sum(1 for r in reports if (r.reward or 0) > 0.5),
                       "seconds": round(annotate_seconds, 1)},
    }


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
    for phase, task in enumerate(("click-test", "focus-text")):
        seeds = list(range(phase * 1000, phase * 1000 + EPISODES_PER_PHASE))
        started = time.monotonic()
        sessions = annotate(daphne_server, ["ann1", "ann2"], pid, tasks[task], seeds)
        spent = time.monotonic() - started
        expected = "untrained" if phase == 0 else "c1"
        assert {s.checkpoint for s in sessions} == {expected}, [s.checkpoint for s in sessions]
        cycle = run_cycle(manager, pid)
        report.append(figures(cycle, sessions, spent))
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
    after = annotate(daphne_server, ["ann1"], pid, tasks["click-test"], [5000])
    assert after[0].checkpoint == "c2"
    print("FLYWHEEL-SUMMARY", json.dumps({"cycles": report, "deployed_success": [report[0]["success_before"],
                                                                                 *deployed_rates]}))
    worker_quiet(timeout=120)
