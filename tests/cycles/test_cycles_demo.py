"""The flywheel demonstration (`make flywheel`): from the real cold-start v0 (a LoRA of SmolLM2-135M-Instruct trained on
the scripted solvers' demonstrations of three MiniWoB tasks, `python -m trainer coldstart`), simulated annotators
supervise episodes through the same REST and WebSocket API the browser uses; their data is routed, snapshotted, mixed
with a replay of v0's demonstrations (found by lineage), trained on with the project's recipe (a LoRA from the
deployed weights), evaluated on held-out seeds and deployed when it beats the deployed checkpoint, three times. Prints
per cycle the success on the old tasks (v0's three) and on the new ones, rows and seconds.

The project's tasks are v0's three (where it scores about 100 %) and tasks it was never trained on, where people's
corrections are what teaches it: four MiniWoB tasks and the shop's add-to-basket tasks (four products, annotated in
turn), held out as an authored web-app task on the same shop (a fifth product, the same page: webapp/demo.py
DEMO_AUTHORED_EVAL). Two of the
MiniWoB tasks are one click that v0 gets right about half the time (click-dialog, click-tab); two take several steps
that v0 has never seen (click-option: select, then Submit; enter-text: click, type, Submit), where it scored 0 of 10
(it clicks the first radio, or into the field, until the step limit): more to learn than one cycle's corrections teach,
as in a real project. ``LOUPE_DEMO_NEW_TASKS=0`` keeps v0's three only; a comma-separated list names other new
tasks.

The cold start takes 5-30 minutes on a 2-core machine; ``LOUPE_DEMO_V0=<dir>`` reuses one written by
``python -m trainer coldstart --out <dir>`` (its demos.jsonl and checkpoint/). ``LOUPE_DEMO_SEED=<n>`` moves the
annotated episodes to other seeds (the held-out eval seeds stay); ``LOUPE_DEMO_EPISODES=<n>`` annotates n MiniWoB
episodes a cycle instead of 30 (a new task gets three times a v0 task's share: 6 and 2); ``LOUPE_DEMO_CYCLES`` (default 3), ``LOUPE_DEMO_EVAL_SEEDS`` (default 20 a
task). ``LOUPE_DEMO_SETTINGS`` (JSON) changes cycle settings, e.g. the tiny model's recipe for a side-by-side:
``{"recipe": [{"algorithm": "sft", "max_steps": 1000, "lr": 0.003, "max_epochs": 3, "batch_tokens": 2048,
"lora": "r=16"}], "replay_ratio": 2}``."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cycles.cycle_settings import PRETRAINED_LORA
from demo.simulated_annotators import (TRAIN_SEEDS, Api, annotate, cycle_figures, cycle_run, episode_shares,
                                      in_turn, train_seeds)
from tests.factories import PASSWORD, make_member, make_project, make_user
from tests.stack import start_worker, stack_env, worker_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.flywheel, pytest.mark.slow,
              # 4 hours: three cycles took 2 on a busy 2-core machine and the old 2-hour limit cut a run's third;
              # LOUPE_DEMO_TIMEOUT (seconds) sets another
              pytest.mark.timeout(int(os.environ.get("LOUPE_DEMO_TIMEOUT") or 4 * 3600))]

# The project's tasks, as a real project's are: v0's three (trainer/coldstart.py TASKS) and tasks it was never trained
# on (webapp/demo.py holds the same out), where people's corrections are what teaches it.
V0_TASKS = ("click-button", "click-link", "focus-text")
_NEW = os.environ.get("LOUPE_DEMO_NEW_TASKS", "1")
NEW_TASKS = (("click-dialog", "click-tab", "click-option", "enter-text") if _NEW == "1" else
             () if _NEW == "0" else tuple(t.strip() for t in _NEW.split(",") if t.strip()))
TASKS = (*V0_TASKS, *NEW_TASKS)
# a task's step limit (its train and eval tasks): one click is one step; click-option is two, enter-text three, and a
# step more leaves room for one wrong click
MAX_STEPS = {"click-option": 4, "enter-text": 4, "click-checkboxes": 6}
SHOP = bool(NEW_TASKS)  # the shop's train task, and the authored shop task held out
SHOP_EPISODES = 2  # a cycle's shop episodes, each another product's task (its seed changes nothing)
# MiniWoB episodes a cycle, split between the tasks (a new task three times a v0 task's share: v0 gets its own right,
# so people there mostly approve) and the two annotators
EPISODES_PER_CYCLE = int(os.environ.get("LOUPE_DEMO_EPISODES") or 2 * len(V0_TASKS) + 6 * len(NEW_TASKS))
CYCLES = int(os.environ.get("LOUPE_DEMO_CYCLES") or 3)
# a task: 20 held-out episodes a checkpoint, seeds 1000-1019 (the cold start's held-out range); the same seeds for
# every checkpoint, never annotated (train seeds are 10000 on); the shop task's one episode
EVAL_SEEDS = int(os.environ.get("LOUPE_DEMO_EVAL_SEEDS") or 20)
MARGIN = 0.05
# The cycle recipe for SmolLM2's LoRA v0, as the demo project of `make run` starts with (cycles/cycle_settings.py)
SETTINGS = PRETRAINED_LORA

@pytest.fixture(scope="module")
def workers(module_stack, tmp_path_factory):
    """As `make run` starts them: live work (rollouts, default) with two processes, training on its own."""
    stack, path = module_stack
    checkpoints = tmp_path_factory.mktemp("checkpoints")
    env = stack_env(LOUPE_CHECKPOINT_DIR=checkpoints)
    start_worker(stack, path, env, queues="live,rollouts,default", name="live", concurrency=2)
    start_worker(stack, path, env, queues="train", name="train", concurrency=1)
    return checkpoints


def cold_start_v0(project, checkpoints: Path):
    """v0 as the bootstrap makes it: a cold-start TrainingRun whose directory holds demos.jsonl and checkpoint/,
    deployed. Trained here by the real trainer command unless LOUPE_DEMO_V0 names one already trained."""
    from training import deployments
    from training.models import TrainingRun

    run = TrainingRun.objects.create(project=project, algorithm="sft", status="succeeded",
                                     config={"stages": [{"algorithm": "coldstart"}], "deploy_as": "v0"})
    out = checkpoints / f"project-{project.pk}" / f"run-{run.pk}"
    started = time.monotonic()
    if os.environ.get("LOUPE_DEMO_V0"):
        shutil.copytree(os.environ["LOUPE_DEMO_V0"], out)
    else:
        subprocess.run([sys.executable, "-m", "trainer", "coldstart", "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    v0 = deployments.checkpoint_register(project=project, name="v0", uri=str(out / "checkpoint"), produced_by=run)
    deployments.deployment_promote(project=project, checkpoint=v0, reason="cold start v0")
    return round(time.monotonic() - started, 1)


def test_three_cycles_of_simulated_corrections_raise_the_cold_start_v0(daphne_server, workers):
    from webapp.demo import DEMO_AUTHORED_EVAL, DEMO_AUTHORED_TEACHERS

    project = make_project("Flywheel demo")
    make_member(project, make_user("lead"), "manager")
    for name in ("ann1", "ann2"):
        make_member(project, make_user(name), "annotator")
    v0_seconds = cold_start_v0(project, workers)

    manager, pid = Api(daphne_server, "lead", PASSWORD), project.pk
    tasks, new = {}, list(NEW_TASKS)
    for name in TASKS:
        steps = MAX_STEPS.get(name, 3)
        tasks[name] = manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "task_name": name, "split": "train", "seed_start": TRAIN_SEEDS[0], "seed_end": TRAIN_SEEDS[1],
            "max_steps": steps})
        manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "task_name": name, "split": "eval", "seed_start": 1000, "seed_end": 1999, "max_steps": steps})
    if SHOP:
        shop = [manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "env_kind": "webapp", "task_name": name, "split": "train", "seed_start": 0, "seed_end": 0,
            "max_steps": 6}) for name in DEMO_AUTHORED_TEACHERS]
        held = manager.call("POST", f"/api/v1/projects/{pid}/tasks/", {
            "env_kind": "webapp", "definition": DEMO_AUTHORED_EVAL, "split": "eval", "seed_start": 0, "seed_end": 0,
            "max_steps": 6})
        new.append(held["task_name"])
    manager.call("PATCH", f"/api/v1/projects/{pid}/routing", {"rule": "reward", "reward_threshold": 0.5})
    settings = {**SETTINGS, "min_new_rows": EPISODES_PER_CYCLE // 2, "eval_seeds": EVAL_SEEDS, "margin": MARGIN}
    settings.update(json.loads(os.environ.get("LOUPE_DEMO_SETTINGS") or "{}"))
    used = manager.call("PATCH", f"/api/v1/projects/{pid}/cycle-settings", settings)
    run = int(os.environ.get("LOUPE_DEMO_SEED") or 0)
    first_seed = train_seeds(run, 0, 1)[0]

    report, deployed = [], []
    for n in range(CYCLES):
        started, sessions = time.monotonic(), []
        for name, share in episode_shares(EPISODES_PER_CYCLE, TASKS, V0_TASKS).items():
            seeds = train_seeds(run, n, share)
            sessions += annotate(daphne_server, ["ann1", "ann2"], PASSWORD, pid, tasks[name], seeds)
        if SHOP:
            for task in in_turn(shop, n, SHOP_EPISODES):  # the shop's products in turn, one an episode
                sessions += annotate(daphne_server, ["ann1", "ann2"], PASSWORD, pid, task, [0])
        spent = time.monotonic() - started
        cycle = cycle_run(manager, pid, timeout=5400)
        assert cycle["state"] in ("deployed", "rejected"), (cycle["state"], cycle["decision"], cycle["error"],
                                                            cycle["log_tail"][-2000:])
        numbers = cycle_figures(cycle, sessions, spent, groups={"old": V0_TASKS, "new": new})
        numbers["data"] = cycle["decision_data"].get("data")
        numbers["val_loss"] = [m.get("val_loss") for m in (cycle["run"] or {}).get("metrics", []) if "val_loss" in m]
        if not deployed:
            deployed.append(numbers["before"])  # v0, on the same held-out seeds
        deployed.append(numbers["after"] if cycle["state"] == "deployed" else deployed[-1])
        numbers["deployed"] = deployed[-1]
        report.append(numbers)
        print("FLYWHEEL", json.dumps(numbers))
        print(f"FLYWHEEL cycle {n + 1}: {cycle['state']}; deployed held-out success {deployed[-1]['all']:.2f} "
              f"(old {deployed[-1]['old']:.2f}, new {deployed[-1].get('new')}; v0 {deployed[0]['all']:.2f}); "
              f"rows {numbers['rows']}; {numbers['cycle_seconds']} s (annotation {spent:.0f} s); per task "
              f"{numbers['per_task_before']} -> {numbers['per_task_after']}", flush=True)

    print("FLYWHEEL-SUMMARY", json.dumps({"v0_seconds": v0_seconds, "first_seed": first_seed, "recipe": used["recipe"],
                                         "replay_ratio": used["replay_ratio"], "deployed": deployed,
                                         "cycles": [{k: c[k] for k in ("state", "before", "after", "cycle_seconds",
                                                                       "rows")} for c in report]}))
    worker_quiet(timeout=120)
    # issue 34's bar: two promotions, each by more than the margin on the same seeds, 15 points above v0 at the end,
    # the old tasks no more than 5 points below v0's
    promoted = [c for c in report if c["state"] == "deployed"]
    assert len(promoted) >= min(2, CYCLES), report
    assert all(c["after"]["all"] > c["before"]["all"] + MARGIN - 1e-9 for c in promoted), report
    assert deployed[-1]["all"] >= deployed[0]["all"] + 0.15 - 1e-9, deployed
    assert deployed[-1]["old"] >= deployed[0]["old"] - 0.05 - 1e-9, deployed
