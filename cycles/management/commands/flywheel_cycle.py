"""Run one flywheel cycle of a project now: `python manage.py flywheel_cycle <project> [--wait]`."""
import json
import time

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from cycles import cycles
from cycles.models import CYCLE_TERMINAL, Cycle
from projects.models import Project


class Command(BaseCommand):
    help = ("Start a flywheel cycle (gate, snapshot, train, evaluate, decide, deploy) of a project on the Celery "
            "workers, as the project's schedule or the Cycles page would.")

    def add_arguments(self, parser):
        parser.add_argument("project", help="Project slug or id.")
        parser.add_argument("--wait", action="store_true", help="Follow the cycle until it ends; exit 1 unless deployed "
                                                                "or rejected.")
        parser.add_argument("--timeout", type=float, default=3600, help="Seconds --wait waits at most.")

    def handle(self, *args, project, wait, timeout, **options):
        found = Project.objects.filter(slug=project).first() or \
            (Project.objects.filter(pk=int(project)).first() if project.isdigit() else None)
        if found is None:
            raise CommandError(f"No project '{project}'.")
        try:
            cycle = cycles.cycle_start(project=found, trigger="command")
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"Cycle {cycle.iteration} of {found.name} started (id {cycle.pk}); the Celery workers run it.")
        if not wait:
            return
        deadline, state = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            cycle = Cycle.objects.get(pk=cycle.pk)
            if cycle.state != state:
                state = cycle.state
                self.stdout.write(f"  {state}")
            if cycle.state in CYCLE_TERMINAL:
                break
            time.sleep(1)
        else:
            raise CommandError(f"Cycle {cycle.iteration} is still {cycle.state} after {timeout:.0f} s; is a worker "
                               "consuming the default and train queues?")
        self.stdout.write(json.dumps({"iteration": cycle.iteration, "state": cycle.state, "decision": cycle.decision,
                                      "error": cycle.error, "timings": cycle.timings}))
        if cycle.state not in ("deployed", "rejected"):
            raise CommandError(f"Cycle {cycle.iteration} ended {cycle.state}: {cycle.error or cycle.decision}")
