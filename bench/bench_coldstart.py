"""Cold-start benchmark: the recipe of trainer/coldstart.py end to end, as the flywheel runs it.

Demonstrations from the scripted solvers, SFT of the tiny model, then evaluation in the real
MiniWoB environment on held-out seeds (1000-1049, 50 a task). The target (trainer issue): v0 reaches
at least 50 % success on click-button, click-link and focus-text after at most 10 minutes of CPU.
Prints one JSON object; writes the SFT loss curve to bench/results/coldstart_loss.svg. About 7 minutes
on 2 cores.

Usage: ``.venv/bin/python bench/bench_coldstart.py [--seeds 1000-1049]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = 0.5
BUDGET_S = 600


def _trainer(*args: str) -> tuple[float, list[dict]]:
    """Run ``python -m trainer ARGS``; (wall seconds, its JSON progress lines). Fails loudly."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "trainer", *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"trainer {args[0]} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return time.monotonic() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default="1000-1049", help="held-out seeds to evaluate on")
    args = parser.parse_args()

    from bench.chart import line_chart_svg
    from trainer import coldstart as recipe

    work = Path(tempfile.mkdtemp(prefix="bench-coldstart-"))
    coldstart_s, progress = _trainer("coldstart", "--out", str(work))  # what the flywheel's cold-start run runs
    sft = next(line["metrics"] for line in progress if line.get("done"))
    demos_s = sft["demos"]["seconds"]
    sft_s = coldstart_s - demos_s
    eval_s, _ = _trainer("eval", "--init", str(work / "checkpoint"), "--tasks", ",".join(recipe.TASKS), "--seeds", args.seeds,
                         "--max-episode-steps", "3", "--out", str(work / "eval"))
    metrics = json.loads((work / "eval" / "metrics.json").read_text())
    curve = [(line["step"], line["loss"]) for line in progress if line.get("phase") == "sft" and "loss" in line]
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "coldstart_loss.svg").write_text(line_chart_svg(
        {"SFT loss": curve}, title="Cold start: SFT loss of v0", x_label="step", y_label="loss"))
    success = metrics["overall"]["success_rate"]
    print(json.dumps({
        "train_seconds": round(demos_s + sft_s, 1),
        "demos_seconds": round(demos_s, 1),
        "sft_seconds": round(sft_s, 1),
        "sft_tokens_per_s": round(sft["tokens_per_s"]),
        "sft_steps": sft["steps"],
        "final_loss": round(sft["final_loss"], 4),
        "eval_seconds": round(eval_s, 1),
        "held_out_seeds": args.seeds,
        "success_rate": round(success, 4),
        "per_task": {task: round(m["success_rate"], 4) for task, m in metrics["per_task"].items()},
        "void_rate": round(metrics["overall"]["void_rate"], 4),
        "target_success": TARGET,
        "target_met": success >= TARGET and demos_s + sft_s <= BUDGET_S,
        "loss_chart": "bench/results/coldstart_loss.svg",
    }))


if __name__ == "__main__":
    main()
