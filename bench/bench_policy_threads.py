"""Local policies answering at once, as a worker's processes do: milliseconds an answer of the tiny model (48 new
tokens, untrained, so every answer is as long) for one process alone and for two processes at once, with torch's
default threads (a thread a core) and with one thread a process (``LOUPE_POLICY_THREADS``, the workers' default).

Why: Celery runs a worker's tasks in several processes, each with its own policy. With a thread a core, each OpenMP
thread of one process waits at every operation for a thread the other process holds the core of: on 2 cores two
policies answered 40-100 times slower than alone (7 s an answer against 65 ms). With one thread each they answer as
fast as alone, and one alone is no faster with two threads (63 against 65 ms).

Usage: ``.venv/bin/python bench/bench_policy_threads.py`` (or ``python -m bench policy_threads``). Prints JSON.
``LOUPE_BENCH_POLICY_ANSWERS`` sets the answers a process gives (default 10).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MESSAGES = [{"role": "system", "content": "Act on the screen. Reply Thought: then Action:."},
            {"role": "user", "content": 'Task: Click on the "ok" button.\n[text] "Pick one" x=40, y=20\n'
                                        '[button] "ok" x=20, y=60\n[button] "cancel" x=80, y=60'}]
NEW_TOKENS = 48


def child(checkpoint: str, threads: int, answers: int) -> None:
    """One worker process: a local policy with ``threads`` torch threads (0: torch's default) answering."""
    from agent.policies.local import LocalPolicy

    policy = LocalPolicy(checkpoint, max_new_tokens=NEW_TOKENS, stop_at_action=False, num_threads=threads or None)
    policy.act(MESSAGES)  # warm
    started = time.perf_counter()
    for _ in range(answers):
        policy.act(MESSAGES)
    print(json.dumps({"ms_per_answer": (time.perf_counter() - started) * 1000 / answers}))


def run(checkpoint: str, threads: int, processes: int, answers: int) -> float:
    """Mean milliseconds an answer over ``processes`` processes answering at the same time."""
    argv = [sys.executable, __file__, "--child", checkpoint, str(threads), str(answers)]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # threads as the policy sets them
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(processes)]
    figures = []
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"a policy process failed (exit {proc.returncode})")
        figures.append(json.loads(out.strip().splitlines()[-1])["ms_per_answer"])
    return round(sum(figures) / len(figures), 1)


def main() -> None:
    from trainer.model import save_tiny_untrained

    answers = int(os.environ.get("LOUPE_BENCH_POLICY_ANSWERS", "10"))
    with tempfile.TemporaryDirectory(prefix="loupe-bench-threads-") as tmp:
        checkpoint = str(save_tiny_untrained(Path(tmp) / "tiny"))
        result = {"cpus": os.cpu_count(), "answers_per_process": answers, "new_tokens": NEW_TOKENS}
        for name, threads in (("torch_default_threads", 0), ("one_thread", 1)):
            result[f"alone_ms_per_answer_{name}"] = run(checkpoint, threads, 1, answers)
            result[f"two_at_once_ms_per_answer_{name}"] = run(checkpoint, threads, 2, answers)
        for name in ("torch_default_threads", "one_thread"):  # against one process alone with one thread
            result[f"two_at_once_slowdown_{name}"] = round(
                result[f"two_at_once_ms_per_answer_{name}"] / result["alone_ms_per_answer_one_thread"], 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
