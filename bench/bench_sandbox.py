"""What the environments' sandboxes (agent/envs/sandbox.py) cost.

Run: ``.venv/bin/python bench/bench_sandbox.py [--rounds 15]``. Prints one JSON object:

- ``sandbox_start``: a sandbox made and closed (bubblewrap's namespaces, its cgroup, its home's tmpfs);
- ``command``: ``true`` run as is and in a sandbox (cgroup, nsenter, setpriv: what every command of a desktop session,
  its AT-SPI walk and a terminal's commands pay);
- ``miniwob`` / ``webapp``: reset and step medians, in one process, interleaved (a loaded machine's speed drifts
  between runs): ``unconfined`` (the browser as it runs where no sandbox can be made, as it ran before sandboxes),
  ``cpus1`` and ``cpus2`` (sandboxed with a CPU quota of 1 and of 2 cores, the default);
- ``desktop_new_session``: a desktop's new session, its sandbox included (``python -m bench env`` has the rest).
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.actions import Action  # noqa: E402
from agent.envs import sandbox  # noqa: E402
from bench.bench_env import _summary  # noqa: E402

MODES = ("unconfined", "cpus1", "cpus2")


def _browser(kind: str, mode: str):
    from agent.envs.miniwob import MiniWoBEnv
    from agent.envs.webapp import WebAppEnv

    found = sandbox._support
    if mode == "unconfined":  # the set-up where no sandbox can be made
        sandbox._support = sandbox.Support(False, False, "", "bench: unconfined")
    try:
        env = (MiniWoBEnv if kind == "miniwob" else WebAppEnv)(limits=sandbox.Limits(cpus=2.0 if mode == "cpus2"
                                                                                      else 1.0))
        env.reset("click-button" if kind == "miniwob" else "shop-add-to-basket", 0)  # starts not measured
    finally:
        sandbox._support = found
    return env


def bench_browsers(kind: str, rounds: int) -> dict:
    task = "click-button" if kind == "miniwob" else "shop-add-to-basket"
    action = Action("click", {"x": 150, "y": 205}) if kind == "miniwob" else Action(
        "scroll", {"x": 600, "y": 400, "direction": "down"})
    envs = {mode: _browser(kind, mode) for mode in MODES}
    resets: dict[str, list[float]] = {mode: [] for mode in MODES}
    steps: dict[str, list[float]] = {mode: [] for mode in MODES}
    try:
        for seed in range(rounds):
            for mode in MODES:
                started = time.perf_counter()
                envs[mode].reset(task, seed)
                resets[mode].append((time.perf_counter() - started) * 1000)
                for _ in range(5):
                    started = time.perf_counter()
                    envs[mode].step(action)
                    steps[mode].append((time.perf_counter() - started) * 1000)
    finally:
        for env in envs.values():
            env.close()
    return {mode: {"reset": _summary(resets[mode]), "step": _summary(steps[mode])} for mode in MODES}


def bench_commands(rounds: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix="loupe-bench-sandbox-"))
    lease = sandbox.allocate_uid() if sandbox.support().per_uid else None
    starts, plain, confined = [], [], []
    try:
        for i in range(rounds):
            folder = home / f"home-{i}"
            folder.mkdir()
            if lease:
                os.chown(folder, lease.uid, lease.uid)
            started = time.perf_counter()
            box = sandbox.Sandbox(f"loupe-bench-{os.getpid()}-{i}", binds=[folder], uid=lease.uid if lease else None)
            box.start()
            box.close()
            starts.append((time.perf_counter() - started) * 1000)
        box = sandbox.Sandbox(f"loupe-bench-{os.getpid()}-run", binds=[home / "home-0"],
                              uid=lease.uid if lease else None)
        box.start()
        try:
            for _ in range(rounds * 2):
                for argv, samples in ((["true"], plain), (box.command(["true"], cwd=home / "home-0"), confined)):
                    started = time.perf_counter()
                    subprocess.run(argv, check=True)
                    samples.append((time.perf_counter() - started) * 1000)
        finally:
            box.close()
    finally:
        if lease:
            lease.release()
        subprocess.run(["rm", "-rf", str(home)])
    return {"sandbox_start": _summary(starts), "command": {"plain": _summary(plain), "sandboxed": _summary(confined)}}


def bench_desktop(rounds: int) -> dict:
    from agent.envs.desktop.session import Desktop

    desktop = Desktop()
    samples = []
    try:
        desktop.start()
        desktop.new_session()
        for _ in range(rounds):
            started = time.perf_counter()
            desktop.new_session()
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        desktop.close()
    return _summary(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    found = sandbox.support()
    if not found.namespaces:
        print(json.dumps({"error": f"no sandbox can be made here: {found.reason}"}))
        return
    report = {"support": {"per_uid": found.per_uid, "cgroups": found.cgroups}}
    report.update(bench_commands(args.rounds))
    report["desktop_new_session"] = bench_desktop(args.rounds)
    report["miniwob"] = bench_browsers("miniwob", args.rounds)
    report["webapp"] = bench_browsers("webapp", max(3, args.rounds // 3))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    print(json.dumps({**report, "cpu_count": os.cpu_count(), "load_average_1min": load}))


if __name__ == "__main__":
    main()
