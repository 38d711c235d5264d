"""Flywheel benchmark: the demonstration of tests/cycles/test_cycles_demo.py (`make flywheel`) end to end, as
numbers. From the real cold-start v0 (SmolLM2-135M-Instruct + a LoRA), cycles of simulated annotators' corrections
(through the REST and WebSocket API) on v0's three tasks and on tasks it was not trained on (two MiniWoB tasks, the
shop), each trained with the demo's recipe, evaluated on the same held-out seeds and deployed when it beats the
deployed checkpoint by the margin. Reports per cycle the deployed and candidate success on the old tasks and the new
ones, the rows each cycle trained on (new and replayed) and the seconds each took; writes the chart to
bench/results/flywheel_success.svg.

The cold start alone takes 5-40 minutes on 2 cores (how busy they are), each cycle 15-60 more.
``LOUPE_DEMO_V0=<dir>`` reuses a cold start written by ``python -m trainer coldstart --out <dir>``; the test's other
``LOUPE_DEMO_*`` variables (cycles, episodes, eval seeds, settings) pass through.

Usage: ``.venv/bin/python bench/bench_flywheel.py`` (or ``python -m bench flywheel``)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from bench.chart import line_chart_svg

    started = time.monotonic()
    env = {**os.environ, "LOUPE_TEST_DB_NAME": os.environ.get("LOUPE_TEST_DB_NAME", "test_bench_flywheel"),
           "COLUMNS": "400"}  # room for the reason on pytest's FAILED line
    lines: list[str] = []
    with tempfile.TemporaryFile(mode="w+") as errors:
        proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "flywheel", "-s",
                                 "-q", "tests/cycles/test_cycles_demo.py"], stdout=subprocess.PIPE, stderr=errors,
                                text=True, cwd=ROOT, env=env)
        for line in proc.stdout:  # each cycle's figures as it ends (the whole run takes an hour or more)
            lines.append(line.rstrip("\n"))
            if line.startswith("FLYWHEEL"):
                print(f"[{time.monotonic() - started:.0f} s] {line.rstrip()}", file=sys.stderr, flush=True)
        proc.wait()
        errors.seek(0)
        stderr = errors.read()
    cycles = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("FLYWHEEL {")]
    summary = next((json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("FLYWHEEL-SUMMARY ")), None)
    if summary is None:  # pytest's report (a failure, a timeout) is on stdout; the servers' and trainers' logs on stderr
        raise SystemExit(f"the demonstration ended before its summary (pytest exited {proc.returncode}); its report:\n"
                         + "\n".join(lines[-25:]) + "\n\nthe end of its log:\n"
                         + "\n".join(stderr.strip().splitlines()[-10:]) + "\n\n"
                         # last: `python -m bench` keeps a failed bench's last line as its error
                         + next((line for line in reversed(lines) if line.startswith(("FAILED ", "ERROR "))),
                                f"the demonstration ended before its summary (pytest exited {proc.returncode})"))
    deployed = summary["deployed"]  # per cycle (0: v0): {"all", "old", "new"}
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    # in percent: the deployed checkpoint after each cycle (0: v0) on all, v0's and the new tasks, and each cycle's
    # candidate on all (what the gate compares); a rejected candidate's point stands below or beside the line
    names = {"all": "deployed, all tasks", "old": "deployed, v0's tasks", "new": "deployed, new tasks"}
    series = {name: [(i, 100 * d[group]) for i, d in enumerate(deployed) if d.get(group) is not None]
              for group, name in names.items()}
    series["candidate, all tasks"] = [(i + 1, 100 * c["after"]["all"]) for i, c in enumerate(cycles)
                                      if c["after"].get("all") is not None]
    (out / "flywheel_success.svg").write_text(line_chart_svg(
        series, title="Flywheel: held-out success after each cycle (cycle 0: the cold-start v0)", x_label="cycle",
        y_label="success (%)"))
    print(json.dumps({
        "v0": deployed[0] if deployed else None, "deployed_per_cycle": deployed[1:],
        "candidate_per_cycle": [c["after"] for c in cycles],
        "per_task": [{"before": c["per_task_before"], "after": c["per_task_after"]} for c in cycles],
        "states": [c["state"] for c in cycles],
        "rows_per_cycle": [{"snapshot": c["rows"], "mix": (c.get("data") or {}).get("sft", {}).get("train_rows"),
                            "replayed": (c.get("data") or {}).get("sft", {}).get("replay_rows")} for c in cycles],
        "seconds_per_cycle": [{"annotate": c["annotation"]["seconds"], "cycle": c["cycle_seconds"],
                               "by_state": c["seconds_by_state"]} for c in cycles],
        "annotation": [c["annotation"] for c in cycles],
        "v0_seconds": summary["v0_seconds"], "recipe": summary["recipe"], "replay_ratio": summary["replay_ratio"],
        "bar_met": proc.returncode == 0, "seconds": round(time.monotonic() - started, 1),
        "chart": "bench/results/flywheel_success.svg"}, indent=2))


if __name__ == "__main__":
    main()
