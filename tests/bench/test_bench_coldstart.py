"""bench/bench_coldstart.py end to end on the tiny model and a few seeds: the cold start, its evaluation on v0's
tasks, the figures it prints (a bench that ran 27 minutes once, then failed on a name the recipe no longer had)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.configs import ColdstartConfig, parse_tasks

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.browser
def test_the_coldstart_bench_trains_evaluates_on_the_recipes_tasks_and_prints_its_figures(tmp_path):
    proc = subprocess.run([sys.executable, "bench/bench_coldstart.py", "--base", "tiny", "--demo-seeds", "0-1",
                           "--max-steps", "2", "--seeds", "1000-1000", "--keep", str(tmp_path / "run")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(figures["per_task"]) == sorted(parse_tasks(ColdstartConfig().tasks))
    assert 0.0 <= figures["success_rate"] <= 1.0 and figures["sft_steps"] == 2 and figures["coldstart_seconds"] > 0
    assert (tmp_path / "run" / "checkpoint").is_dir() and (tmp_path / "run" / "eval" / "metrics.json").is_file()
