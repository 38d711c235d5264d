"""`make bench`: run every bench/bench_*.py (but the flywheel's, one to two hours: `python -m bench flywheel`), each
in its own process, and print one JSON report (also kept in bench/results/latest.json). `python -m bench env audio`
runs a subset; options after the names go to those benches (`python -m bench osworld --dir PATH`)."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


# Benches of their own hour: run only when named (`python -m bench flywheel`), never by a plain `make bench`.
ONLY_WHEN_NAMED = {"flywheel",  # from the cold start through three cycles: one to two hours on 2 cores
                   "osworld",  # OSWorld's own task files, which it needs a folder of (--dir)
                   "ask"}  # trains its checkpoint, then five configurations of episodes: about 10 minutes on 2 cores


# A name that brings others along: the env figures include the webapp env's (bench_webapp.py, its own process).
WITH = {"env": {"webapp"}}


def _run(script: Path, options: list[str]) -> subprocess.CompletedProcess:
    """Run one bench: its JSON from stdout; its stderr shown as it comes (the flywheel's cycles, an hour apart, and
    any bench's progress) and kept for the error line."""
    proc = subprocess.Popen([sys.executable, str(script), *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=HERE.parent)
    errors: list[str] = []

    def relay() -> None:
        for line in proc.stderr:
            errors.append(line)
            sys.stderr.write(line)
            sys.stderr.flush()

    relayed = threading.Thread(target=relay, daemon=True)
    relayed.start()
    out = proc.stdout.read()
    proc.wait()
    relayed.join()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "".join(errors))


def main(argv: list[str]) -> int:
    options = argv[next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv)):]
    argv = argv[:len(argv) - len(options)]
    wanted = set(argv)
    wanted |= {other for name in argv for other in WITH.get(name, ())}
    report: dict = {"machine": {"cpus": __import__("os").cpu_count()}, "results": {}}
    failed = False
    for script in sorted(HERE.glob("bench_*.py")):
        name = script.stem.removeprefix("bench_")
        if (wanted and name not in wanted) or (not wanted and name in ONLY_WHEN_NAMED):
            continue
        started = time.monotonic()
        proc = _run(script, options)
        entry: dict = {"seconds": round(time.monotonic() - started, 1)}
        try:
            entry.update(json.loads(proc.stdout[proc.stdout.index("{"):]))
        except ValueError:
            entry["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        if proc.returncode != 0:
            failed = True
            entry.setdefault("error", f"exit {proc.returncode}")
        report["results"][name] = entry
        print(f"{name}: {json.dumps(entry)}", file=sys.stderr)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
