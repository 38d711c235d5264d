"""`python -m bench` (bench/__main__.py) shows a bench's stderr as it comes, not only at its end (the flywheel's cycles
come an hour apart), and still keeps it for the report's error line."""
import threading
import time

import bench.__main__ as runner


def test_a_benchs_stderr_is_shown_while_it_runs_and_kept_for_the_report(tmp_path, capfd):
    marker = tmp_path / "seen"
    script = tmp_path / "bench_talk.py"
    # the bench goes on only once its first line has been seen (or gives up after 20 s, exit 4)
    script.write_text("import os, sys, time\n"
                      "print('cycle 1 ended', file=sys.stderr, flush=True)\n"
                      f"deadline = time.monotonic() + 20\n"
                      f"while not os.path.exists({str(marker)!r}):\n"
                      "    if time.monotonic() > deadline:\n"
                      "        sys.exit(4)\n"
                      "    time.sleep(0.05)\n"
                      "print('{\"ok\": 1}')\n"
                      "print('boom: the last line', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    result = {}
    thread = threading.Thread(target=lambda: result.update(proc=runner._run(script, [])))
    thread.start()
    shown, deadline = "", time.monotonic() + 20
    while "cycle 1 ended" not in shown and time.monotonic() < deadline:
        shown += capfd.readouterr().err
        time.sleep(0.05)
    marker.touch()
    thread.join(30)
    shown += capfd.readouterr().err
    proc = result["proc"]
    assert proc.returncode == 3, proc.stderr  # 4: the first line was not shown while the bench ran
    assert proc.stdout.strip() == '{"ok": 1}'
    assert shown == "cycle 1 ended\nboom: the last line\n" == proc.stderr
