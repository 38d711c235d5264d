"""Tasks are queued by their registered names (core/jobs.py): every name that the settings route to a queue or that
beat sends resolves to the task of that name (autodiscovery runs at the first lookup where no worker ran it).
The judge's and the polisher's tasks live in annotation/tasks.py under their flywheel names: the audio queue's
``annotation.tasks.*`` route does not take them."""
from django.conf import settings

from core.jobs import job


def test_every_routed_and_scheduled_task_name_resolves_to_its_task():
    routed = {name for name in settings.CELERY_TASK_ROUTES if "*" not in name}
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    queued = {"flywheel.tasks.cycle_scheduled", "flywheel.tasks.episode_judge", "flywheel.tasks.step_polish"}
    for name in sorted(routed | scheduled | queued):
        assert job(name).name == name


def test_concurrent_first_lookups_in_a_fresh_process_all_find_their_task():
    """daphne serves requests in threads: two that queue their first job at once ran the discovery side by side and
    one got a tasks module half imported ('never registered', a 500); before the lock 2-6 of 8 lookups failed."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for _ in range(3):
        proc = subprocess.run([sys.executable, str(root / "tests" / "core" / "jobs_race.py")], capture_output=True,
                              text=True, cwd=root, env={**__import__("os").environ, "PYTHONPATH": str(root)},
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.strip().splitlines()[-1] == "0 []", proc.stdout
