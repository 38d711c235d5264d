"""Asking a person when the policy is unsure (issue 39): what a confidence floor buys.

Autonomous episodes of a checkpoint on held-out seeds, a simulated annotator answering every ask, at three floors,
against full supervision (every step asked) and none (never asked). The annotator is the simulated annotators'
person (demo/simulated_annotators.py): it approves a proposal that does what the task's scripted solver would
(a click inside the same element, the same action otherwise) and edits any other to the solver's step. The policy
and the rollout loop are the rollout worker's (agent.policies.local, agent.rollout.run_episode), in this process; a
proposal's confidence is agent/confidence.py's, as the live supervisor reads it.

Person-seconds: a person's time, modelled as ``--approve-s`` a glance that approves and ``--edit-s`` one that
corrects (the README's figures state which). Per configuration: the share of steps asked, the success rate and the
person-seconds (and ``unasked_wrong``: steps the model was sure of that the person would have corrected), and whether
some floor comes within 5 points of full supervision's success with at most half of its
person-seconds.

The checkpoint: ``--checkpoint DIR`` (a deployed checkpoint's directory), else one trained here: the tiny model,
SFT for ``--train-steps`` steps on the terminal tasks' scripted demonstrations (seeds 0-29): partly trained on
purpose, so that it is sometimes right and sometimes not.

Usage: ``.venv/bin/python -m bench ask [--checkpoint DIR] [--floors 0.5,0.7,0.9] [--seeds 1000-1009]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TASKS = "terminal-hello,terminal-mkdir,terminal-count"
WITHIN_POINTS = 0.05
AT_MOST_SHARE = 0.5


def _trainer(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "trainer", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"trainer {args[0]} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")


def train_checkpoint(work: Path, env: str, tasks: str, steps: int) -> Path:
    """The tiny model, SFT for ``steps`` steps on scripted demonstrations of ``tasks`` (seeds 0-29)."""
    from trainer.model import save_tiny_untrained

    init = save_tiny_untrained(work / "untrained")
    _trainer("demos", "--env", env, "--tasks", tasks, "--seeds", "0-29", "--out", str(work / "demos.jsonl"))
    _trainer("sft", "--init", str(init), "--data", str(work / "demos.jsonl"), "--out", str(work / "checkpoint"),
             "--max-steps", str(steps), "--lr", "0.005", "--max-epochs", "0")
    return work / "checkpoint"


class SimulatedPerson:
    """The rollout loop's supervisor: asked below ``floor`` (every step: ``floor`` > 1; never: 0), it answers as the
    simulated annotators do, and counts what it did."""

    def __init__(self, task: str, floor: float, approve_s: float, edit_s: float):
        self.task, self.floor, self.approve_s, self.edit_s = task, floor, approve_s, edit_s
        self.history: list = []
        self.steps = self.asked = self.approved = self.edited = self.missed = 0
        self.seconds = 0.0

    def as_supervisor(self):
        from agent.rollout import Decision, Supervisor
        from agent.solvers import SolverError, solve_step
        from demo.simulated_annotators import same_step

        person = self

        class Asked(Supervisor):
            def review(self, index, observation, proposal, *, attempt=1, repeated=False, confidence=None):
                person.steps += 1
                score = confidence.score if confidence is not None else 0.0  # no logprobs: unsure
                if proposal.is_void:
                    score = 0.0  # a void turn cannot run: a person is asked whatever the floor, but "none"
                try:
                    solver = solve_step(person.task, observation, person.history)
                except SolverError:
                    solver = None
                payload = {"action": proposal.action.to_dict() if proposal.action else None}
                right = solver is not None and solver.action is not None and same_step(payload, solver.action,
                                                                                         observation)
                if not score < person.floor:
                    person.missed += not right  # sure, and wrong: it runs, unasked
                    return Decision("approve")
                person.asked += 1
                if right:
                    person.approved += 1
                    person.seconds += person.approve_s
                    return Decision("approve")
                person.edited += 1
                person.seconds += person.edit_s
                if solver is None or solver.action is None:
                    return Decision("finish", outcome="failure")
                return Decision("edit", turn=solver)

        return Asked()

    def on_step(self, record) -> None:
        self.history.append(record.turn)


def run_config(policy, env, tasks: list[str], seeds: list[int], floor: float, args) -> dict:
    from agent.envs import tasks_for
    from agent.rollout import run_episode

    totals = {"episodes": 0, "successes": 0, "steps": 0, "asked": 0, "approved": 0, "edited": 0, "missed": 0,
              "seconds": 0.0}
    limits = tasks_for(args.env)
    started = time.monotonic()
    for task in tasks:
        for seed in seeds:
            person = SimulatedPerson(task, floor, args.approve_s, args.edit_s)
            result = run_episode(env, policy, task=task, seed=seed, max_steps=limits[task].max_steps,
                                 supervisor=person.as_supervisor(), on_step=person.on_step)
            totals["episodes"] += 1
            totals["successes"] += int(result.reward >= 0.5)
            for key in ("steps", "asked", "approved", "edited", "missed"):
                totals[key] += getattr(person, key)
            totals["seconds"] += person.seconds
    return {"success_rate": round(totals["successes"] / totals["episodes"], 4),
            "asked_share": round(totals["asked"] / totals["steps"], 4) if totals["steps"] else 0.0,
            "person_seconds": round(totals["seconds"], 1), "asked": totals["asked"], "steps": totals["steps"],
            "approved": totals["approved"], "edited": totals["edited"], "episodes": totals["episodes"],
            "unasked_wrong": totals["missed"],
            "wall_seconds": round(time.monotonic() - started, 1)}


def verdict(results: dict, floors: list[float]) -> dict:
    """Whether some floor comes within 5 points of full supervision's success with at most half its person-seconds."""
    full = results["full"]
    met = [f for f in floors if results[f"floor {f}"]["success_rate"] >= full["success_rate"] - WITHIN_POINTS - 1e-9
           and results[f"floor {f}"]["person_seconds"] <= AT_MOST_SHARE * full["person_seconds"] + 1e-9]
    return {"floors_meeting_target": met, "target_met": bool(met),
            "target": f"within {WITHIN_POINTS * 100:.0f} points of full supervision's success with at most "
                      f"{AT_MOST_SHARE * 100:.0f} % of its person-seconds"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="", help="the checkpoint dir to run (default: train the tiny one)")
    parser.add_argument("--env", default="terminal", help="environment kind (default: terminal)")
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--seeds", default="1000-1009", help="held-out seeds, a range")
    parser.add_argument("--floors", default="0.5,0.7,0.9")
    parser.add_argument("--train-steps", type=int, default=30, help="SFT steps of the checkpoint trained here")
    parser.add_argument("--approve-s", type=float, default=3.0, help="person-seconds a glance that approves takes")
    parser.add_argument("--edit-s", type=float, default=12.0, help="person-seconds a correction takes")
    parser.add_argument("--keep", default="", help="work here instead of a temporary dir")
    args = parser.parse_args()

    from agent.envs import make_env
    from agent.policies.local import LocalPolicy

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-ask-"))
    work.mkdir(parents=True, exist_ok=True)
    tasks = args.tasks.split(",")
    trained = not args.checkpoint
    checkpoint = Path(args.checkpoint) if args.checkpoint else train_checkpoint(work, args.env, args.tasks,
                                                                                args.train_steps)
    low, high = (int(x) for x in args.seeds.split("-"))
    seeds = list(range(low, high + 1))
    floors = [float(f) for f in args.floors.split(",")]
    policy = LocalPolicy(checkpoint, num_threads=1)
    env = make_env(args.env)
    results = {}
    try:
        results["none"] = run_config(policy, env, tasks, seeds, 0.0, args)
        for floor in floors:
            results[f"floor {floor}"] = run_config(policy, env, tasks, seeds, floor, args)
        results["full"] = run_config(policy, env, tasks, seeds, 2.0, args)
    finally:
        env.close()
    print(json.dumps({
        "checkpoint": str(checkpoint), "trained_here": {"train_steps": args.train_steps} if trained else None,
        "env": args.env, "tasks": tasks, "seeds": args.seeds, "floors": floors,
        "person_model": {"approve_s": args.approve_s, "edit_s": args.edit_s},
        "results": results, **verdict(results, floors), "load_average": [round(x, 1) for x in os.getloadavg()],
    }, indent=1))


if __name__ == "__main__":
    main()
